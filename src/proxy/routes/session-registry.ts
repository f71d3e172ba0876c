import { OpenStreams, type EndReason } from './open-streams.js';
import type { RouteState } from './route-state.js';
import type { ClusterShardView } from './shard-view.js';

/** An upgraded session (exec, attach, port-forward) as the registry needs it, from its judgement on. */
export interface OpenSession {
  cluster: string;
  /** Whether the shard may open this session under a table's view: the judgement of its request, made again. */
  admittedBy(view: ClusterShardView, shard: string): boolean;
  /** Ends it: the request to the API server if no answer came yet, else both spliced connections. */
  end(): void;
}

/** Why a table no longer serves a session, or undefined while it would admit its request. */
export function sessionEndReason(state: RouteState, session: Pick<OpenSession, 'cluster' | 'admittedBy'>): EndReason | undefined {
  const entry = state.clusters.get(session.cluster);
  if (entry === undefined) return 'cluster-removed';
  if (session.admittedBy(entry.view, state.table.shard)) return undefined;
  return state.fenced ? 'fenced' : 'reassigned';
}

/**
 * The upgraded sessions through the proxy, from their judgement (before the API server answers) to their end. A
 * table under which a session's request would be refused ends it before the table is acknowledged, so a shard that
 * lost a pod's namespace keeps no shell in it; a table that leaves the namespace to the shard leaves the session be,
 * whatever else it grants or revokes (unlike a watch, a session carries no selector to go stale).
 */
export class SessionRegistry extends OpenStreams<OpenSession> {
  constructor() {
    super({ endReason: sessionEndReason, end: (session) => session.end() });
  }
}
