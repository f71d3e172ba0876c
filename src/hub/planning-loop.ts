import type { Logger } from 'pino';
import type { HubMetrics } from '../metrics/index.js';
import { CoalescingRunner } from '../runtime/index.js';
import type { HashSettings, Ownership } from '../sharding/index.js';
import type { KeptBuckets, RouteSigner } from '../transport/index.js';
import { desiredPlan } from './desired.js';
import type { Fleet } from './fleet.js';
import type { ClusterHealth } from './health.js';
import type { HubOptions } from './options.js';
import { reconcile } from './reconciler.js';
import { RevocationClock } from './revocation-clock.js';

/**
 * How often a leader checks the control buckets: a pass checks them first when this long has passed since the last
 * check, and a pass runs this long after the last one if nothing else came. A pass whose write failed has them
 * checked on the next. How soon a deleted bucket comes back.
 */
export const BUCKET_CHECK_MS = 5_000;

export interface PlanningLoopOptions extends Pick<HubOptions, 'debounceMs' | 'proxyLeaseSeconds' | 'grantMarginMs' | 'handoverHistory' | 'operators' | 'moveUnitsOfOfflineClusters'> {
  /** The fleet's hash settings (`--hash-algorithm`): plans are made with them. */
  fleetHash?: HashSettings | undefined;
  fleet: Fleet;
  buckets: KeptBuckets;
  signer: RouteSigner;
  metrics: HubMetrics;
  logger: Logger;
  /** Wall time: what is recorded for people, and table versions. */
  now: () => number;
  /** What leases and deadlines are timed on (never stepped). */
  monotonic: () => number;
  isLeader: () => boolean;
  /** Whether the fleet has read every bucket: a plan from part of it would take away what the rest grants. */
  loaded: () => boolean;
  health: () => ReadonlyMap<string, ClusterHealth>;
}

export interface PlanningLoop {
  /**
   * Plans, if leader: at once, or once more right after the pass under way for all the changes that came meanwhile;
   * under a steady stream of changes, one pass per `debounceMs`.
   */
  schedule(): void;
  /** Leadership gained: lease expiry is counted from now on, and a pass is due. */
  becameLeader(): void;
  /** Drops the timer set for the next handover deadline. */
  cancelDeadline(): void;
  /** Cancels what is scheduled and waits for the pass under way, if any. */
  stop(): Promise<void>;
}

/**
 * The leader's passes, one at a time: the desired plan from the fleet's reports (desired.ts), then the route
 * tables and handovers moved toward it (reconciler.ts). A pass runs after changes, and again at the deadline of
 * the next handover that waits for a lease to expire. A change is planned at once; the changes that come during a pass
 * are folded into one more, and a steady stream is paced to one pass per `debounceMs` (runtime's `CoalescingRunner`).
 */
export function createPlanningLoop(options: PlanningLoopOptions): PlanningLoop {
  const { fleet, buckets, signer, metrics, logger, now, monotonic, isLeader } = options;
  /** When this process first saw each pending revocation: a grant by expiry counts from there (revocation-clock.ts). */
  const revocations = new RevocationClock();
  let deadline: NodeJS.Timeout | undefined;
  /** When this instance last became leader (its monotonic clock). */
  let leaderSince = 0;
  /**
   * When the buckets were last checked; undefined: on the next pass. A check costs a round trip to every bucket's
   * stream, so a change is not made to wait for one each time.
   */
  let bucketsCheckedAt: number | undefined;

  const schedule = (): void => {
    if (isLeader()) runner.schedule();
  };
  const due = (): void => {
    if (isLeader()) runner.runDue();
  };

  /** What the last pass froze and left out, to log a change once rather than every pass. */
  let lastFrozen = '';
  let lastNotAdmitted = '';
  const pass = async (): Promise<void> => {
    if (!isLeader() || !options.loaded()) return;
    const started = performance.now();
    const at = monotonic();
    const checkBuckets = bucketsCheckedAt === undefined || at - bucketsCheckedAt >= BUCKET_CHECK_MS;
    if (checkBuckets) bucketsCheckedAt = at;
    try {
      const plan = desiredPlan({
        ...(options.fleetHash === undefined ? {} : { hash: options.fleetHash }),
        clusters: new Map([...fleet.clusters].map(([name, r]) => [name, { labels: r.cluster.labels }])),
        operators: options.operators,
        moveUnitsOfOfflineClusters: options.moveUnitsOfOfflineClusters,
        reports: fleet.reports,
        health: options.health(),
        heard: new Set(fleet.lastSeen.keys()),
        previous: intendedOwnership(fleet),
      });
      const frozen = `${plan.frozen.join(', ')} ${plan.outOfStep?.join(', ') ?? ''}`.trim();
      if (frozen !== lastFrozen && frozen !== '') {
        logger.warn(
          { operators: plan.frozen, ...(plan.outOfStep ? { clustersHashingOtherwise: plan.outOfStep } : {}) },
          plan.outOfStep
            ? "every operator frozen: these clusters' stored reports hash otherwise than --hash-algorithm; route tables stay as published"
            : 'operators frozen: a config is invalid or cannot be placed; their route tables stay as published',
        );
      }
      lastFrozen = frozen;
      const notAdmitted = (plan.notAdmitted ?? []).map((c) => `${c.operator}@${c.cluster}`).join(', ');
      if (notAdmitted !== lastNotAdmitted && notAdmitted !== '') {
        logger.warn({ configs: plan.notAdmitted }, 'ShardingConfigs left out: --operator-file does not list their operator with their cluster');
      }
      lastNotAdmitted = notAdmitted;
      const result = await reconcile(
        {
          fleet,
          routes: buckets.routes,
          signer,
          state: buckets.state,
          leaseSeconds: options.proxyLeaseSeconds,
          grantMarginMs: options.grantMarginMs,
          leaderSince,
          clock: now,
          monotonic,
          revocations,
          historyLimit: options.handoverHistory,
          logger,
          metrics,
          ...(checkBuckets ? { buckets } : {}),
        },
        plan,
        now(),
      );
      if (result.failed) bucketsCheckedAt = undefined;
      if (result.published.length) {
        logger.info({ tables: result.published.map((t) => `${t.operator}/${t.shard}@${t.version}`) }, 'published route tables');
      }
      clearTimeout(deadline);
      // A deadline is no change: its pass must not hold the next change back for the debounce. Counted from this
      // pass, so a stream of changes (each a pass) is never joined by one that only checks.
      const next = Math.min(result.nextDeadline ?? Infinity, monotonic() + BUCKET_CHECK_MS);
      deadline = setTimeout(due, Math.max(0, next - monotonic()) + 10);
    } catch (err) {
      bucketsCheckedAt = undefined;
      logger.error({ err }, 'planning failed; retrying on the next change');
    } finally {
      metrics.reconcileSeconds.observe((performance.now() - started) / 1000);
    }
  };

  const runner = new CoalescingRunner({ intervalMs: options.debounceMs, task: pass, now: monotonic });

  return {
    schedule,
    becameLeader: () => {
      leaderSince = monotonic();
      bucketsCheckedAt = undefined;
      schedule();
    },
    cancelDeadline: () => clearTimeout(deadline),
    stop: () => runner.stop(),
  };
}

/** What each operator's shards were last meant to own: granted units plus those in flight to them. */
function intendedOwnership(fleet: Fleet): Map<string, Ownership> {
  const out = new Map<string, Ownership>();
  for (const [operator, { record }] of fleet.handovers) {
    const shards: Ownership = Object.fromEntries(Object.entries(record.effective).map(([s, u]) => [s, [...u]]));
    for (const p of record.pending) if (p.to !== null) (shards[p.to] ??= []).push(p.unit);
    out.set(operator, shards);
  }
  return out;
}
