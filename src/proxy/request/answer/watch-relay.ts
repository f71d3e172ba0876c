import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { RouteController } from '../../routes/route-controller.js';
import type { ClusterEntry } from '../../routes/route-state.js';
import type { StreamAnswer } from './forward.js';
import type { ResourceRequest } from '../parse/index.js';
import { WatchEventFilter, type EventJudge } from './watch-filter.js';

/**
 * One sharded watch carried from the API server's stream to the client's response through the shard's event filter,
 * with no stream between them: a Transform and two pipes held more of an open watch's memory than the filter's own
 * state (16.6 against 9.1 KiB of heap a watch, bench/results/history.md). The API server's stream waits while the
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

/**
 * Sends a sharded watch's head at once and relays its events through the shard's event filter (WatchRelay);
 * registers it, so a table change can end it.
 */
export function relayWatch(options: { res: ServerResponse; answer: StreamAnswer; entry: ClusterEntry; info: ResourceRequest; controller: RouteController; bookmarks: boolean }): void {
  const { res, answer, entry, info, controller, bookmarks } = options;
  const { group, resource } = info;
  // The client left while the API server answered: its close has passed, nothing would end the upstream stream.
  if (res.destroyed) {
    answer.stream.destroy();
    return;
  }
  res.writeHead(answer.statusCode, answer.headers);
  // A quiet watch must still start, as the API server starts it.
  res.flushHeaders();
  // The judge of the table the request was judged under; registering retargets it to the current one.
  const relay = new WatchRelay(answer.stream, res, { judge: entry.view.eventJudge(group, resource), bookmarks, onFiltered: entry.metrics.countFilteredEvent }, () => {
    unregister();
    entry.metrics.openWatches.dec();
  });
  const unregister = controller.registerWatch({
    cluster: entry.view.name,
    group,
    resource,
    // What the shard's part of the selector carries: a table that revokes any of it ends this watch.
    carries: entry.view.carries(group, resource),
    expire: () => relay.expire(),
    retarget: (view) => {
      relay.filter.judge = view.eventJudge(group, resource);
    },
  });
  entry.metrics.openWatches.inc();
}
