import type { ClusterHealth } from '../sharding/index.js';

/** Cluster health as the hub sees it through heartbeats: the planner's own type (`src/sharding`), one meaning. */
export type { ClusterHealth };

export interface HealthThresholds {
  /** Without a heartbeat for this long a cluster is Unknown. */
  unknownAfterMs: number;
  /** Without a heartbeat for this long a cluster is Offline (> unknownAfterMs). */
  offlineAfterMs: number;
}

/**
 * Ready while heartbeats arrive; Unknown, then Offline as they stop. A cluster never heard from since the hub
 * started is Unknown (the hub cannot tell), and a heartbeat saying the agent lost its API server is Unknown too.
 */
export function clusterHealth(
  last: { at: number; apiServerReachable: boolean } | undefined,
  now: number,
  thresholds: HealthThresholds,
): ClusterHealth {
  if (!last) return 'Unknown';
  const silence = now - last.at;
  if (silence >= thresholds.offlineAfterMs) return 'Offline';
  if (silence >= thresholds.unknownAfterMs || !last.apiServerReachable) return 'Unknown';
  return 'Ready';
}
