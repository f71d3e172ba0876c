import type { RouteState } from './route-state.js';

/** An open watch as the registry needs it: where it goes and the selector it was opened with. */
export interface OpenWatch {
  cluster: string;
  group: string;
  resource: string;
  selector: string;
  /** Sends the client 410 Expired (so it lists again) and closes the stream. */
  expire(): void;
}

export type EndReason = 'reassigned' | 'cluster-removed' | 'fenced';

/**
 * The watches open through the proxy. When a route table changes, every watch whose injected selector no
 * longer matches the shard's (buckets revoked or granted, limits changed) is ended, so the operator lists
 * again under the new selector and never keeps serving a revoked bucket from a stream.
 */
export class WatchRegistry {
  private readonly open = new Set<OpenWatch>();

  add(watch: OpenWatch): () => void {
    this.open.add(watch);
    return () => this.open.delete(watch);
  }

  get size(): number {
    return this.open.size;
  }

  /** Ends the watches the new state invalidates; returns how many per cluster and reason. */
  reconcile(state: RouteState, onEnded: (watch: OpenWatch, reason: EndReason) => void): void {
    for (const watch of [...this.open]) {
      const entry = state.clusters.get(watch.cluster);
      let reason: EndReason | undefined;
      if (entry === undefined) reason = 'cluster-removed';
      else if (entry.view.selectorFor(watch.group, watch.resource) !== watch.selector) reason = state.fenced ? 'fenced' : 'reassigned';
      if (reason === undefined) continue;
      this.open.delete(watch);
      watch.expire();
      onEnded(watch, reason);
    }
  }
}
