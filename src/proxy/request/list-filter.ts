import { Readable } from 'node:stream';
import { UnjudgedListError } from '../../errors.js';
import type { ObjectMetadata } from '../routes/shard-view.js';

/** The head of a list answer the proxy reads to find `metadata` (it precedes `items` in the API server's JSON). */
const HEAD_LIMIT = 64 * 1024;
/** The most of a list the proxy reads to filter it: a bigger one gets an error; the client can page with `limit`. */
export const LIST_FILTER_MAX_BYTES = 128 * 1024 * 1024;

export interface ListJudgement {
  /** The shard selector sent: a list whose `metadata.shardInfo.selector` is exactly it passes untouched. */
  expected: string | undefined;
  admit(metadata: ObjectMetadata): boolean;
  /** Called when the proxy filtered the list itself; `unconfirmed`: a selector was sent and not echoed. */
  onFiltered(unconfirmed: boolean): void;
}

interface ListBody {
  kind?: unknown;
  metadata?: { shardInfo?: { selector?: unknown }; remainingItemCount?: unknown };
  items?: { metadata?: ObjectMetadata }[];
  rows?: { object?: { metadata?: ObjectMetadata } }[];
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

/** Keeps the items (or a Table's rows) the shard may see; the count of what remains is no longer known. */
export function filterListBody(text: string, admit: (metadata: ObjectMetadata) => boolean): string {
  let body: ListBody;
  try {
    body = JSON.parse(text) as ListBody;
  } catch {
    throw new UnjudgedListError('the answer is not JSON');
  }
  if (body === null || typeof body !== 'object') throw new UnjudgedListError('the answer is not a list');
  if (Array.isArray(body.items)) body.items = body.items.filter((item) => admit(item.metadata ?? {}));
  else if (body.kind === 'Table' && Array.isArray(body.rows)) body.rows = body.rows.filter((row) => admit(row.object?.metadata ?? {}));
  else throw new UnjudgedListError('the answer has no items');
  if (body.metadata && typeof body.metadata === 'object') delete body.metadata.remainingItemCount;
  return JSON.stringify(body);
}

/**
 * A list answer where objects carry no labels: streamed on untouched once its head shows the API server applied
 * the shard selector sent; otherwise read whole (at most LIST_FILTER_MAX_BYTES) and filtered by the proxy.
 * Resolves to what to send; rejects with UnjudgedListError when the answer cannot be judged.
 */
export async function judgeList(source: Readable, judgement: ListJudgement): Promise<Readable | string> {
  const chunks: Buffer[] = [];
  let size = 0;
  const iterator = source[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  let ended = false;
  const next = async (): Promise<boolean> => {
    const step = await iterator.next();
    if (step.done === true) {
      ended = true;
      return false;
    }
    const chunk = Buffer.isBuffer(step.value) ? step.value : Buffer.from(step.value as string);
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
      const head = Buffer.concat(chunks);
      if (head.includes('"items":')) {
        if (echoedSelector(head) !== judgement.expected) break;
        if (ended) return head.toString('utf8');
        return Readable.from(
          (async function* rest() {
            yield head;
            for (let step = await iterator.next(); step.done !== true; step = await iterator.next()) yield step.value;
          })(),
        );
      }
    }
  }
  while (!ended) await next();
  judgement.onFiltered(judgement.expected !== undefined);
  return filterListBody(Buffer.concat(chunks).toString('utf8'), judgement.admit);
}
