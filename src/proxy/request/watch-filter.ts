import { Transform, type TransformCallback } from 'node:stream';
import type { ObjectMetadata } from '../routes/shard-view.js';

/** Decides, per watch event object, whether the shard may see it (the current route table's view). */
export type EventAdmission = (metadata: ObjectMetadata) => boolean;

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

/**
 * Filters a JSON watch stream (one event per line) incrementally: events whose object is outside the shard
 * are dropped, or turned into BOOKMARKs carrying only the resourceVersion when the client asked for bookmarks.
 * DELETED events always pass, because they only tell the client to forget an object. Only the unfinished last
 * line is held back, never the stream.
 */
export class WatchEventFilter extends Transform {
  private pending: Buffer[] = [];
  private readonly admit: EventAdmission;
  private expired = false;
  private readonly bookmarks: boolean;
  private readonly onFiltered: () => void;

  constructor(options: { admit: EventAdmission; bookmarks: boolean; onFiltered: () => void }) {
    super();
    this.admit = options.admit;
    this.bookmarks = options.bookmarks;
    this.onFiltered = options.onFiltered;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (this.expired) return callback();
    let start = 0;
    let newline = chunk.indexOf(NEWLINE, start);
    while (newline >= 0) {
      const piece = chunk.subarray(start, newline + 1);
      const line = this.pending.length === 0 ? piece : Buffer.concat([...this.pending, piece]);
      this.pending = [];
      this.emitLine(line);
      start = newline + 1;
      newline = chunk.indexOf(NEWLINE, start);
    }
    if (start < chunk.length) this.pending.push(chunk.subarray(start));
    callback();
  }

  override _flush(callback: TransformCallback): void {
    if (this.expired) return callback();
    if (this.pending.length > 0) this.emitLine(Buffer.concat(this.pending));
    this.pending = [];
    callback();
  }

  /** Tells the client its view is stale (410 Expired, so it lists again) and ends the stream. */
  expire(): void {
    if (this.expired || this.writableEnded || this.destroyed) return;
    this.expired = true;
    this.pending = [];
    this.push(EXPIRED_EVENT);
    this.push(null);
    this.end();
  }

  private emitLine(line: Buffer): void {
    let event: WatchEvent;
    try {
      event = JSON.parse(line.toString('utf8')) as WatchEvent;
    } catch {
      // Not an event we understand (partial protocol change, blank keep-alive): the client decides.
      this.push(line);
      return;
    }
    if ((event.type !== 'ADDED' && event.type !== 'MODIFIED') || event.object === undefined) {
      this.push(line);
      return;
    }
    const { object } = event;
    if (object.kind === 'Table' && Array.isArray(object.rows)) {
      const kept = object.rows.filter((row) => this.admit(row.object?.metadata ?? {}));
      if (kept.length === object.rows.length) {
        this.push(line);
        return;
      }
      this.onFiltered();
      if (kept.length > 0) this.push(`${JSON.stringify({ ...event, object: { ...object, rows: kept } })}\n`);
      else if (this.bookmarks) this.pushBookmark(object);
      return;
    }
    if (this.admit(object.metadata ?? {})) {
      this.push(line);
      return;
    }
    this.onFiltered();
    if (this.bookmarks) this.pushBookmark(object);
  }

  private pushBookmark(object: NonNullable<WatchEvent['object']>): void {
    const { kind, apiVersion, metadata } = object;
    this.push(`${JSON.stringify({ type: 'BOOKMARK', object: { kind, apiVersion, metadata: { resourceVersion: metadata?.resourceVersion } } })}\n`);
  }
}
