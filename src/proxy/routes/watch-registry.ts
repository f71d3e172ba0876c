import { OpenStreams, type EndReason } from './open-streams.js';
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
 * serving a revoked unit from a stream; the others stay open and are told the new table's view (from then on
 * compared with, and judged by, that table's units).
 */
export class WatchRegistry extends OpenStreams<OpenWatch> {
  constructor() {
    super({
      endReason,
      end: (watch) => watch.expire(),
      kept: (state, watch) => {
        const view = state.clusters.get(watch.cluster)!.view;
        watch.carries = view.carries(watch.group, watch.resource);
        watch.retarget?.(view);
      },
    });
  }
}
