import type { RouteState } from './route-state.js';

/**
 * Why a table ended an open stream: `reassigned` a unit it serves was revoked (or its limits changed), `fenced` the
 * lease ran out, `cluster-removed` its cluster left the table, `granted` (watches only) its resource gained units.
 */
export type EndReason = 'reassigned' | 'cluster-removed' | 'fenced' | 'granted';

/** What a registry needs of one kind of open stream. */
export interface StreamRules<T> {
  /** Why a table no longer serves the stream, or undefined while it does. */
  endReason(state: RouteState, stream: T): EndReason | undefined;
  end(stream: T): void;
  /** Told of each table the stream stays open under (undefined at registration before any table). */
  kept?(state: RouteState, stream: T): void;
}

/**
 * Streams open through the proxy (watches, upgraded sessions), held to each route table as it is installed: those
 * it no longer serves are ended before it is acknowledged. One registered after a table changed (judged under the
 * old one) is held to the current one at once.
 */
export class OpenStreams<T> {
  private readonly open = new Set<T>();

  constructor(private readonly rules: StreamRules<T>) {}

  get size(): number {
    return this.open.size;
  }

  /** Registers a stream, or ends it at once when `state` no longer serves it; returns its unregistration. */
  add(stream: T, state: RouteState | undefined, onEnded: (stream: T, reason: EndReason) => void): () => void {
    const reason = state === undefined ? undefined : this.rules.endReason(state, stream);
    if (reason !== undefined) {
      this.rules.end(stream);
      onEnded(stream, reason);
      return () => undefined;
    }
    this.open.add(stream);
    if (state !== undefined) this.rules.kept?.(state, stream);
    return () => this.open.delete(stream);
  }

  /** Ends the streams the new state no longer serves; tells the others of it. */
  reconcile(state: RouteState, onEnded: (stream: T, reason: EndReason) => void): void {
    for (const stream of [...this.open]) {
      const reason = this.rules.endReason(state, stream);
      if (reason === undefined) {
        this.rules.kept?.(state, stream);
        continue;
      }
      this.open.delete(stream);
      this.rules.end(stream);
      onEnded(stream, reason);
    }
  }
}
