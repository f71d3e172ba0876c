import type { RouteState } from './route-state.js';
import type { CarriedUnits, ClusterShardView } from './shard-view.js';

/** An open watch as the registry needs it: where it goes and what its selector carries. */
export interface OpenWatch {
  cluster: string;
  group: string;
  resource: string;
  /** What its selector carries: `view.carries(group, resource)` of the table it was opened under. */
  carries: CarriedUnits;
  /** Sends the client 410 Expired (so it lists again) and closes the stream. */
  expire(): void;
  /** Told the view of each later table the watch stays open under (its events are judged by that table). */
  retarget?(view: ClusterShardView): void;
}

/**
 * Why a watch was ended: `reassigned` a unit it carries was revoked (or its limits changed), `fenced` the lease ran
 * out, `cluster-removed` its cluster left the table, `granted` its resource only gained units (the stream cannot
 * carry the gained units' objects, so the operator lists again).
 */
export type EndReason = 'reassigned' | 'cluster-removed' | 'fenced' | 'granted';

/**
 * Whether a table still serves a watch: undefined when the watch carries exactly what the table gives its resource,
 * else why it must end. Revoking any unit it carries ends it; so does a change of its limits (whether a new
 * selector narrows an old one is not decided, a change is taken as one) and, since a stream opened under the old
 * selector never shows the objects of units gained since, gaining units.
 */
export function endReason(state: RouteState, watch: Pick<OpenWatch, 'cluster' | 'group' | 'resource' | 'carries'>): EndReason | undefined {
  const entry = state.clusters.get(watch.cluster);
  if (entry === undefined) return 'cluster-removed';
  const now = entry.view.carries(watch.group, watch.resource);
  const was = watch.carries;
  if (now === was) return undefined;
  const revoked = now.rest !== was.rest || [...was.buckets].some((b) => !now.buckets.has(b));
  if (revoked) return state.fenced ? 'fenced' : 'reassigned';
  return now.buckets.size > was.buckets.size ? 'granted' : undefined;
}

/**
 * The watches open through the proxy. When a route table changes, every watch that no longer carries exactly what
 * the new table gives (see endReason) is ended, so the operator lists again under the new selector and never keeps
 * serving a revoked unit from a stream; the others stay open and are told the new table's view. A watch that
 * registers after a table changed (judged under the old one, answered under the new) is held to the same test.
 */
export class WatchRegistry {
  private readonly open = new Set<OpenWatch>();

  /** Registers a watch, or ends it at once when `state` no longer serves it; returns its unregistration. */
  add(watch: OpenWatch, state: RouteState | undefined, onEnded: (watch: OpenWatch, reason: EndReason) => void): () => void {
    const reason = state === undefined ? undefined : endReason(state, watch);
    if (reason !== undefined) {
      watch.expire();
      onEnded(watch, reason);
      return () => undefined;
    }
    this.open.add(watch);
    const entry = state?.clusters.get(watch.cluster);
    if (entry) {
      watch.carries = entry.view.carries(watch.group, watch.resource);
      watch.retarget?.(entry.view);
    }
    return () => this.open.delete(watch);
  }

  get size(): number {
    return this.open.size;
  }

  /** Ends the watches the new state invalidates and retargets the others. */
  reconcile(state: RouteState, onEnded: (watch: OpenWatch, reason: EndReason) => void): void {
    for (const watch of [...this.open]) {
      const reason = endReason(state, watch);
      if (reason === undefined) {
        const view = state.clusters.get(watch.cluster)!.view;
        // Same units under a new table: from now on compared with (and judged by) this table's.
        watch.carries = view.carries(watch.group, watch.resource);
        watch.retarget?.(view);
        continue;
      }
      this.open.delete(watch);
      watch.expire();
      onEnded(watch, reason);
    }
  }
}
