import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { WatchEventFilter, type EventJudge } from './watch-filter.js';

/**
 * One sharded watch carried from the API server's stream to the client's response through the shard's event filter,
 * with no stream between them: a Transform and two pipes held more of an open watch's memory than the filter's own
 * state (16.6 against 9.1 KiB of heap a watch, docs/proxy.md, session 16). The API server's stream waits while the
 * client's socket is full.
 */
export class WatchRelay {
  readonly filter: WatchEventFilter;
  /** Ended by either side, or expired: the upstream's abort that follows is no failure. */
  private done = false;

  constructor(
    private readonly upstream: Readable,
    private readonly res: ServerResponse,
    options: { judge: EventJudge; bookmarks: boolean; onFiltered: () => void },
    onClose: () => void,
  ) {
    this.filter = new WatchEventFilter({
      ...options,
      send: (piece) => {
        if (!res.write(piece)) upstream.pause();
      },
    });
    upstream.on('data', (chunk: Buffer) => this.filter.write(chunk));
    // An end after a cut line is a failure (node:http2 ends a stream whose connection closed cleanly mid-event).
    upstream.once('end', () => {
      if (this.filter.end()) this.finish();
      else this.cut();
    });
    // A live watch that fails cuts the client's connection, as the API server failing would.
    upstream.on('error', () => this.cut());
    res.on('drain', () => upstream.resume());
    res.once('close', () => {
      this.done = true;
      upstream.destroy();
      onClose();
    });
  }

  /** Ends the watch with 410 Expired, so the client lists again under the table in force. */
  expire(): void {
    if (this.done) return;
    this.upstream.destroy();
    this.filter.expire();
    this.finish();
  }

  private finish(): void {
    this.done = true;
    this.res.end();
  }

  private cut(): void {
    if (this.done) return;
    this.done = true;
    this.res.destroy();
  }
}
