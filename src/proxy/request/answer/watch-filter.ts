import type { EventJudge, ObjectMetadata } from '../../routes/shard-view.js';
import { EventScanner } from './json-scan.js';

export type { EventJudge };

interface ObjectMeta extends ObjectMetadata {
  resourceVersion?: string;
}

interface WatchEvent {
  type?: string;
  object?: {
    kind?: string;
    apiVersion?: string;
    metadata?: ObjectMeta;
    /** A Table (kubectl get -w): one row per object, each with the object's metadata at least. */
    rows?: { object?: { metadata?: ObjectMeta } }[];
  };
}

const NEWLINE = 0x0a;

/** The event a client-go or client-node reflector answers with a fresh list: 410 Gone / Expired. */
export const EXPIRED_EVENT = `${JSON.stringify({
  type: 'ERROR',
  object: {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: 'the shard assignment changed: list again under the new selector',
    reason: 'Expired',
    code: 410,
  },
})}\n`;

/** How a filter reads the events it judges: the scanner (JSON.parse when it is not sure), or JSON.parse alone. */
export type EventReading = 'scan' | 'parse';

/**
 * What an event's type asks of its object: ADDED, MODIFIED and any type the proxy does not know (or none) that the
 * shard may see it (`admits`); DELETED that its unit is the shard's (`owns`: a deleted object of another shard
 * arrives whole where the API server applied no shard selector); BOOKMARK and ERROR carry a resourceVersion or a
 * Status, no object of a shard, and pass.
 */
function testOf(type: string | undefined): 'admits' | 'owns' | undefined {
  if (type === 'BOOKMARK' || type === 'ERROR') return undefined;
  return type === 'DELETED' ? 'owns' : 'admits';
}

/** One scanner per set of label keys, shared by every filter (a scanner keeps no state between events). */
const scanners = new Map<string, EventScanner>();
/** The scanner of each judge (one per table and resource): a watch opened or retargeted looks it up here. */
const judgeScanners = new WeakMap<EventJudge, EventScanner>();
function scannerFor(judge: EventJudge): EventScanner {
  let scanner = judgeScanners.get(judge);
  if (scanner !== undefined) return scanner;
  const key = judge.labelKeys.join('\n');
  scanner = scanners.get(key);
  if (scanner === undefined) {
    scanner = new EventScanner(judge.labelKeys);
    // Bounded by the label keys of the tables a proxy has served; a table's keys rarely change.
    if (scanners.size >= 256) scanners.clear();
    scanners.set(key, scanner);
  }
  judgeScanners.set(judge, scanner);
  return scanner;
}

/** Where a filter's output goes, piece by piece, in order: a Buffer of lines that passed, or a line of its own. */
export type EventSink = (piece: Buffer | string) => void;

/**
 * Filters a JSON watch stream (one event per line) incrementally: events whose object is outside the shard
 * are dropped, or turned into BOOKMARKs carrying only the resourceVersion when the client asked for bookmarks.
 * A DELETED event is judged by its object's unit alone (`testOf`). What cannot be judged (a line that is not one
 * JSON object, an event without its object, an object without metadata) is dropped. Only the unfinished last line
 * is held back, never the stream.
 *
 * What is read depends on the judge (the current table's, see EventJudge): where the API server applied everything
 * the judge checks (`mustJudge` false) the bytes pass unread, a chunk at a time up to its last newline; otherwise
 * each line is scanned for the few fields the judge reads (json-scan.ts) and parsed only when the scanner is not
 * sure (Tables, escapes in a key it reads, duplicate keys, malformed lines). Consecutive lines that pass are sent as
 * one piece.
 *
 * Not a stream: its output goes to `send` (the relay writes it to the client), so a watch holds no stream states and
 * pipes of its own between the API server's stream and the client's.
 */
export class WatchEventFilter {
  private pending: Buffer[] = [];
  /** The chunk being judged and its lines [runFrom, runTo) that passed and are not sent yet. */
  private runChunk: Buffer | undefined;
  private runFrom = 0;
  private runTo = 0;
  private current: EventJudge;
  private scanner: EventScanner;
  private readonly reading: EventReading;
  /** Ended (the API server's stream ended) or expired: nothing more is sent. */
  private ended = false;
  private readonly bookmarks: boolean;
  private readonly onFiltered: () => void;
  private readonly send: EventSink;

  constructor(options: { judge: EventJudge; bookmarks: boolean; onFiltered: () => void; send: EventSink; reading?: EventReading }) {
    this.current = options.judge;
    this.send = options.send;
    this.scanner = scannerFor(options.judge);
    this.reading = options.reading ?? 'scan';
    this.bookmarks = options.bookmarks;
    this.onFiltered = options.onFiltered;
  }

  /** The judge of the table in force (the watch registry sets it when a table changes and the watch stays). */
  get judge(): EventJudge {
    return this.current;
  }

  set judge(judge: EventJudge) {
    if (judge === this.current) return;
    this.current = judge;
    this.scanner = scannerFor(judge);
  }

  /** Judges the next piece of the API server's stream; what passes is sent before it returns. */
  write(chunk: Buffer): void {
    if (this.ended) return;
    if (!this.current.mustJudge) {
      this.passUnread(chunk);
      return;
    }
    let start = 0;
    this.runChunk = chunk;
    this.runFrom = 0;
    this.runTo = 0;
    let newline = chunk.indexOf(NEWLINE, start);
    while (newline >= 0) {
      if (this.pending.length > 0) {
        const line = Buffer.concat([...this.pending, chunk.subarray(start, newline + 1)]);
        this.pending = [];
        this.emitLine(line, true);
        this.runFrom = this.runTo = newline + 1;
      } else if (this.emitLine(chunk.subarray(start, newline + 1), false)) {
        this.runTo = newline + 1;
      } else {
        this.flushRun();
        this.runFrom = this.runTo = newline + 1;
      }
      start = newline + 1;
      newline = chunk.indexOf(NEWLINE, start);
    }
    this.flushRun();
    this.runChunk = undefined;
    if (start < chunk.length) this.pending.push(chunk.subarray(start));
  }

  /** Sends the lines of the current chunk that passed and are not sent yet, as one piece. */
  private flushRun(): void {
    if (this.runChunk !== undefined && this.runFrom < this.runTo) this.send(this.runChunk.subarray(this.runFrom, this.runTo));
    this.runFrom = this.runTo;
  }

  /**
   * The API server's stream ended. True when it ended after a whole line, as the API server ends a watch; false when
   * a line was cut (the connection closed mid-event): that line is not sent, and the relay cuts the client's
   * connection rather than end it as if whole.
   */
  end(): boolean {
    if (this.ended) return true;
    this.ended = true;
    const whole = this.pending.length === 0;
    this.pending = [];
    return whole;
  }

  /**
   * Sends the event that tells the client its view is stale (410 Expired, so it lists again), in place of the held
   * unfinished line, and nothing after it. False when the stream had already ended: nothing is sent then.
   */
  expire(): boolean {
    if (this.ended) return false;
    this.ended = true;
    this.pending = [];
    this.send(EXPIRED_EVENT);
    return true;
  }

  /**
   * Sends what the API server judged, up to the chunk's last newline; the unfinished line waits for the next chunk
   * (so an Expired event, or a switch to judging, always starts on a new line).
   */
  private passUnread(chunk: Buffer): void {
    const last = chunk.lastIndexOf(NEWLINE);
    if (last < 0) {
      this.pending.push(chunk);
      return;
    }
    // The held line's start and its end go as they are: copying them together would copy the whole chunk.
    for (const piece of this.pending) this.send(piece);
    this.pending = [];
    this.send(last + 1 === chunk.length ? chunk : chunk.subarray(0, last + 1));
    if (last + 1 < chunk.length) this.pending.push(chunk.subarray(last + 1));
  }

  /**
   * Judges one line. A line that passes unchanged is sent here only when `send` (else the caller sends it with its
   * neighbours) and the answer is true; whatever else is sent in its place (a bookmark, a Table's kept rows) is sent here.
   */
  private emitLine(line: Buffer, send: boolean): boolean {
    const scanned = this.reading === 'scan' ? this.scanner.scan(line) : undefined;
    let passes: boolean;
    let test: 'admits' | 'owns' | undefined;
    if (scanned === undefined || scanned.kind === 'Table') passes = this.judgeParsed(line);
    else if ((test = testOf(scanned.type)) === undefined) passes = true;
    else if (!scanned.hasObject) passes = this.unjudged();
    else if (scanned.metadata !== undefined && this.current[test](scanned.metadata)) passes = true;
    else {
      this.onFiltered();
      if (this.bookmarks) this.pushBookmark(scanned.kind, scanned.apiVersion, scanned.metadata?.resourceVersion);
      passes = false;
    }
    if (passes && send) {
      this.flushRun();
      this.send(line);
    }
    return passes;
  }

  /** The slow path: the whole event parsed. True when the line passes unchanged. */
  private judgeParsed(line: Buffer): boolean {
    let event: WatchEvent | null;
    try {
      event = JSON.parse(line.toString('utf8')) as WatchEvent | null;
    } catch {
      event = null;
    }
    // Not one JSON object (a garbled or blank line), or an event of objects without one: nothing to judge it by.
    if (event === null || typeof event !== 'object') return this.unjudged();
    const test = testOf(typeof event.type === 'string' ? event.type : undefined);
    if (test === undefined) return true;
    const { object } = event;
    if (object === undefined || object === null || typeof object !== 'object') return this.unjudged();
    const judged = (metadata: ObjectMeta | undefined): boolean => metadata !== undefined && metadata !== null && this.current[test](metadata);
    if (object.kind === 'Table' && Array.isArray(object.rows)) {
      // A row without its object's metadata (includeObject=None) cannot be judged: it is dropped.
      const kept = object.rows.filter((row) => judged(row?.object?.metadata));
      if (kept.length === object.rows.length) return true;
      this.onFiltered();
      if (kept.length > 0) this.pushInstead(`${JSON.stringify({ ...event, object: { ...object, rows: kept } })}\n`);
      else if (this.bookmarks) this.pushBookmark(object.kind, object.apiVersion, object.metadata?.resourceVersion);
      return false;
    }
    if (judged(object.metadata)) return true;
    this.onFiltered();
    if (this.bookmarks) this.pushBookmark(object.kind, object.apiVersion, object.metadata?.resourceVersion);
    return false;
  }

  /** A line that cannot be judged is dropped, never passed: no client could decode it either. */
  private unjudged(): false {
    this.onFiltered();
    return false;
  }

  /** Sends what replaces a line, after the lines before it that passed. */
  private pushInstead(text: string): void {
    this.flushRun();
    this.send(text);
  }

  private pushBookmark(kind: string | undefined, apiVersion: string | undefined, resourceVersion: string | undefined): void {
    this.pushInstead(`${JSON.stringify({ type: 'BOOKMARK', object: { kind, apiVersion, metadata: { resourceVersion } } })}\n`);
  }
}
