import type { Logger } from 'pino';
import type { HubMetrics } from '../metrics/index.js';
import type { Fleet } from './fleet.js';
import { clusterHealth, type ClusterHealth, type HealthThresholds } from './health.js';

export interface HealthWatchOptions {
  fleet: Fleet;
  thresholds: HealthThresholds;
  metrics: Pick<HubMetrics, 'clusters'>;
  logger: Logger;
  now: () => number;
  /** When the hub started listening to heartbeats (its clock; undefined: not yet): a cluster not heard is silent since. */
  listeningSince: () => number | undefined;
  /** Called when a cluster's health changed: the plan may have to follow. */
  changed: () => void;
}

export interface HealthWatch {
  start(): void;
  stop(): void;
  /** Each registered cluster's health now. */
  current(): Map<string, ClusterHealth>;
}

/**
 * Every registered cluster's health. It changes with time, not with a message (heartbeats stop coming), so it is
 * read again twice a second: the counts go to the metrics, and a change is reported.
 */
export function createHealthWatch(options: HealthWatchOptions): HealthWatch {
  const { fleet, thresholds, metrics, logger, now, changed } = options;
  let ticker: NodeJS.Timeout | undefined;
  let last = new Map<string, ClusterHealth>();

  const current = (): Map<string, ClusterHealth> => {
    const at = now();
    const health = new Map<string, ClusterHealth>();
    for (const name of fleet.clusters.keys()) health.set(name, clusterHealth(fleet.lastSeen.get(name), at, thresholds, options.listeningSince() ?? at));
    return health;
  };

  const check = (): void => {
    const health = current();
    const counts: Record<ClusterHealth, number> = { Ready: 0, Unknown: 0, Offline: 0 };
    let anyChanged = false;
    for (const [name, h] of health) {
      counts[h] += 1;
      if (last.get(name) !== h) {
        if (last.has(name)) logger.info({ cluster: name, health: h }, 'cluster health changed');
        anyChanged = true;
      }
    }
    for (const [h, n] of Object.entries(counts)) metrics.clusters.set({ health: h }, n);
    last = health;
    if (anyChanged) changed();
  };

  return {
    start: () => {
      ticker = setInterval(check, 500);
    },
    stop: () => clearInterval(ticker),
    current,
  };
}
