import { Readable } from 'node:stream';
import { UnjudgedListError } from '../../../errors.js';
import type { ObjectMetadata } from '../../routes/shard-view.js';
import { EventScanner } from './json-scan.js';

/** The head of a list answer the proxy reads to find `metadata` (it precedes `items` in the API server's JSON). */
const HEAD_LIMIT = 64 * 1024;
/** The most of a list the proxy reads to filter it: a bigger one gets an error; the client can page with `limit`. */
export const LIST_FILTER_MAX_BYTES = 128 * 1024 * 1024;

export interface ListJudgement {
  /** The shard selector sent: a list whose `metadata.shardInfo.selector` is exactly it passes untouched. */
  expected: string | undefined;
  admit(metadata: ObjectMetadata): boolean;
  /**
   * The label keys `admit` reads: given, a list the proxy filters is scanned (items kept or cut as bytes) rather
   * than parsed and serialised again.
   */
  labelKeys?: readonly string[];
  /** Called when the proxy filtered the list itself; `unconfirmed`: a selector was sent and not echoed. */
  onFiltered(unconfirmed: boolean): void;
  /**
   * The `continue` token to send in place of the API server's, in a list the proxy filtered: the server's names the
   * key it resumes from, which can be an object cut from the page (routes/continue-tokens.ts).
   */
  sealContinue(token: string): string;
}

interface ListBody {
  kind?: unknown;
  metadata?: { shardInfo?: { selector?: unknown }; remainingItemCount?: unknown; continue?: unknown };
  // As JSON may have them: any element or field null.
  items?: ({ metadata?: ObjectMetadata | null } | null)[];
  rows?: ({ object?: { metadata?: ObjectMetadata | null } | null } | null)[];
}

/**
 * The echo, read from the head alone: the text before the first `"items":` closed with `}` must parse as the
 * list's top-level object (JSON keys cannot hide in a base64 `continue` token or a resourceVersion), and its
 * `metadata.shardInfo.selector` must be what was sent. Anything else is not a confirmation.
 */
export function echoedSelector(head: Buffer): string | undefined {
  const at = head.indexOf('"items":');
  if (at < 0) return undefined;
  let text = head.subarray(0, at).toString('utf8').trimEnd();
  if (text.endsWith(',')) text = text.slice(0, -1);
  try {
    const selector = (JSON.parse(`${text}}`) as ListBody).metadata?.shardInfo?.selector;
    return typeof selector === 'string' ? selector : undefined;
  } catch {
    return undefined;
  }
}

/**
 * What a filtered list's metadata says: no count of what remains (no longer known), and a sealed `continue`.
 * Returns whether it changed.
 */
function judgedListMetadata(metadata: Record<string, unknown>, sealContinue: (token: string) => string): boolean {
  let changed = false;
  if (Object.hasOwn(metadata, 'remainingItemCount')) {
    delete metadata.remainingItemCount;
    changed = true;
  }
  const token = metadata.continue;
  if (typeof token === 'string' && token !== '') {
    metadata.continue = sealContinue(token);
    changed = true;
  } else if (token !== undefined && typeof token !== 'string') {
    throw new UnjudgedListError('its continue token is not a string');
  }
  return changed;
}

/** Keeps the items (or a Table's rows) the shard may see; the count of what remains is no longer known. */
export function filterListBody(text: string, admit: (metadata: ObjectMetadata) => boolean, sealContinue: (token: string) => string): string {
  let body: ListBody;
  try {
    body = JSON.parse(text) as ListBody;
  } catch {
    throw new UnjudgedListError('the answer is not JSON');
  }
  if (body === null || typeof body !== 'object') throw new UnjudgedListError('the answer is not a list');
  // An item or row without metadata (a Table's rows under includeObject=None) cannot be judged: it is dropped.
  const judged = (metadata: ObjectMetadata | null | undefined): boolean => metadata !== undefined && metadata !== null && admit(metadata);
  if (Array.isArray(body.items)) body.items = body.items.filter((item) => judged(item?.metadata));
  else if (body.kind === 'Table' && Array.isArray(body.rows)) body.rows = body.rows.filter((row) => judged(row?.object?.metadata));
  else throw new UnjudgedListError('the answer has no items');
  if (body.metadata && typeof body.metadata === 'object') judgedListMetadata(body.metadata as Record<string, unknown>, sealContinue);
  return JSON.stringify(body);
}

/**
 * filterListBody without building the list (and its answer as bytes, or as text where it fell back): the items' bytes are kept or cut as they are (the answer stays the API
 * server's text but for the items cut), the list's `metadata` is parsed and written again only when it holds a
 * `remainingItemCount` (no longer known) or a `continue` (sealed). Falls back to filterListBody wherever the scanner is not sure (a Table,
 * escapes in keys it reads, duplicate keys, anything unusual).
 */
export function filterListBytes(
  body: Buffer,
  admit: (metadata: ObjectMetadata) => boolean,
  labelKeys: readonly string[],
  sealContinue: (token: string) => string,
): Buffer | string {
  const list = new EventScanner(labelKeys).scanList(body);
  if (list === undefined) return filterListBody(body.toString('utf8'), admit, sealContinue);
  const pieces: Buffer[] = [];
  let at = 0;
  const cut = (from: number, to: number, instead?: Buffer): void => {
    pieces.push(body.subarray(at, from));
    if (instead) pieces.push(instead);
    at = to;
  };
  const metadata = list.metadata;
  let newMetadata: Buffer | undefined;
  if (metadata) {
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(body.toString('utf8', metadata[0], metadata[1])) as Record<string, unknown>;
    } catch {
      return filterListBody(body.toString('utf8'), admit, sealContinue);
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return filterListBody(body.toString('utf8'), admit, sealContinue);
    if (judgedListMetadata(parsed, sealContinue)) newMetadata = Buffer.from(JSON.stringify(parsed));
  }
  const kept = list.items.filter((item) => item.metadata !== undefined && admit(item.metadata));
  const replaceItems = kept.length !== list.items.length;
  const edits: [number, number, Buffer | undefined, boolean][] = [];
  if (newMetadata && metadata) edits.push([metadata[0], metadata[1], newMetadata, false]);
  if (replaceItems) edits.push([list.itemsOpen + 1, list.itemsClose, undefined, true]);
  edits.sort((a, b) => a[0] - b[0]);
  for (const [from, to, instead, items] of edits) {
    if (!items) {
      cut(from, to, instead);
      continue;
    }
    cut(from, to);
    kept.forEach((item, i) => {
      if (i > 0) pieces.push(COMMA);
      pieces.push(body.subarray(item.start, item.end));
    });
  }
  pieces.push(body.subarray(at));
  // Bytes, not text: decoding a list to send it encoded again would cost more than the scan.
  return Buffer.concat(pieces);
}

const COMMA = Buffer.from(',');

/**
 * The next chunk of a paused stream, or null at its end. Reading with read() rather than an async iterator leaves
 * the stream usable: what was read can be put back (unshift) and the stream itself handed on.
 */
function nextChunk(source: Readable): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const cleanup = (): void => {
      source.off('readable', onReadable);
      source.off('end', onEnd);
      source.off('error', onError);
      source.off('close', onClose);
    };
    const onReadable = (): void => {
      const chunk = source.read() as Buffer | string | null;
      if (chunk === null) return;
      cleanup();
      resolve(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
    };
    const onEnd = (): void => {
      cleanup();
      resolve(null);
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(err);
    };
    // Destroyed before its end (an aborted answer): not a list.
    const onClose = (): void => {
      cleanup();
      reject(new UnjudgedListError('the answer ended before its end'));
    };
    if (source.readableEnded) return resolve(null);
    if (source.destroyed) return reject(new UnjudgedListError('the answer ended before its end'));
    source.on('readable', onReadable);
    source.on('end', onEnd);
    source.on('error', onError);
    source.on('close', onClose);
  });
}

/**
 * A list answer where objects carry no labels: streamed on untouched once its head shows the API server applied
 * the shard selector sent (the head is put back and the upstream stream itself is returned: no copy, no step per
 * chunk); otherwise read whole (at most LIST_FILTER_MAX_BYTES) and filtered by the proxy.
 * Resolves to what to send (a stream, or the whole answer as bytes or text); rejects with UnjudgedListError when the
 * answer cannot be judged.
 */
export async function judgeList(source: Readable, judgement: ListJudgement): Promise<Readable | Buffer | string> {
  const chunks: Buffer[] = [];
  let size = 0;
  let ended = false;
  const next = async (): Promise<boolean> => {
    const chunk = await nextChunk(source);
    if (chunk === null) {
      ended = true;
      return false;
    }
    size += chunk.length;
    if (size > LIST_FILTER_MAX_BYTES) {
      source.destroy();
      throw new UnjudgedListError(`it is larger than ${LIST_FILTER_MAX_BYTES} bytes; list in pages (limit)`);
    }
    chunks.push(chunk);
    return true;
  };
  if (judgement.expected !== undefined) {
    while (size < HEAD_LIMIT && (await next())) {
      const head = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      if (head.includes('"items":')) {
        if (echoedSelector(head) !== judgement.expected) break;
        // Ended (its end may have been emitted while this was read): the head is the whole answer.
        if (ended || source.readableEnded) return head;
        source.unshift(head);
        return source;
      }
    }
  }
  while (!ended) await next();
  judgement.onFiltered(judgement.expected !== undefined);
  const body = Buffer.concat(chunks);
  if (judgement.labelKeys !== undefined) return filterListBytes(body, judgement.admit, judgement.labelKeys, judgement.sealContinue);
  return filterListBody(body.toString('utf8'), judgement.admit, judgement.sealContinue);
}
