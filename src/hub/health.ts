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
 * started listening (`listeningSince`) is Unknown, then Offline once it has been silent that long: a hub started
 * after a cluster went down must not take it for one that may be up, or it would give units back to that cluster's
 * shards (pinned by test/unit/hub/health.test.ts, 'counts the silence of a cluster never heard from since the hub
 * started listening: Unknown, then Offline'). A heartbeat saying the agent lost its API server is Unknown too.
 */
export function clusterHealth(
  last: { at: number; apiServerReachable: boolean } | undefined,
  now: number,
  thresholds: HealthThresholds,
  listeningSince: number,
): ClusterHealth {
  if (!last) return now - listeningSince >= thresholds.offlineAfterMs ? 'Offline' : 'Unknown';
  const silence = now - last.at;
  if (silence >= thresholds.offlineAfterMs) return 'Offline';
  if (silence >= thresholds.unknownAfterMs || !last.apiServerReachable) return 'Unknown';
  return 'Ready';
}
