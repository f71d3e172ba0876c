import type { KV } from '@nats-io/kv';
import type { Logger } from 'pino';
import { Keys, isWrongRevision } from '../transport/index.js';

export interface LeaderElectionOptions {
  /** The ctrlmesh-hub bucket, whose max age is the lease TTL. */
  kv: KV;
  identity: string;
  /** How often the leader renews and a standby tries to take over; well under the TTL. */
  renewMs: number;
  /** The lease TTL: a leader that could not renew for this long steps down on its own. */
  ttlMs: number;
  logger: Logger;
  onChange: (leader: boolean) => void;
  /** Wall time, for the `renewedAt` people read. */
  now?: () => number;
  /** What the lease's age is measured on (default performance.now). */
  monotonic?: () => number;
  /**
   * Called when a lease write fails for another reason than a refusal: re-creates the buckets if they were
   * deleted (KeptBuckets.ensure), so that a deleted `ctrlmesh-hub` bucket does not leave the fleet leaderless.
   */
  restoreBuckets?: () => Promise<unknown>;
}

export interface LeaderElection {
  isLeader(): boolean;
  /** Stops campaigning; with `release` the lease is deleted so a standby takes over at once. */
  stop(options: { release: boolean }): Promise<void>;
}

/**
 * Leader election through one KV key: `create` takes a free lease, `update` at the known revision renews it
 * (compare-and-set), and the bucket's max age expires a lease nobody renews, so a crashed leader is replaced
 * within one TTL plus one renew period.
 */
export function electLeader(options: LeaderElectionOptions): LeaderElection {
  const { kv, logger } = options;
  const now = options.now ?? Date.now;
  // The lease is a duration: judged on the monotonic clock, so a wall-clock step neither ends nor stretches it.
  const monotonic = options.monotonic ?? (() => performance.now());
  let revision = 0;
  let leader = false;
  let lastRenewed = 0;
  let stopped = false;
  const value = (): string => JSON.stringify({ holder: options.identity, renewedAt: new Date(now()).toISOString() });

  const setLeader = (next: boolean): void => {
    if (next === leader) return;
    leader = next;
    logger.info(next ? 'became the hub leader' : 'no longer the hub leader');
    options.onChange(next);
  };

  const attempt = async (): Promise<void> => {
    try {
      revision = leader ? await kv.update(Keys.leader, value(), revision) : await kv.create(Keys.leader, value());
      lastRenewed = monotonic();
      setLeader(true);
    } catch (err) {
      const refused = isWrongRevision(err);
      // Not awaited: with NATS unreachable the check waits for its own timeout, which must not delay stepping down.
      if (!refused) options.restoreBuckets?.().catch((restoreErr: unknown) => logger.debug({ err: restoreErr }, 'could not check the buckets'));
      if (leader) {
        // Renewal refused (someone else holds the lease) or failed (NATS down): keep leading only while our
        // lease cannot have expired yet; a refusal means it already has.
        if (refused || monotonic() - lastRenewed >= options.ttlMs) {
          logger.warn({ err }, 'lost the hub lease');
          revision = 0;
          setLeader(false);
        }
      }
    }
  };

  let timer: NodeJS.Timeout | undefined;
  const loop = async (): Promise<void> => {
    await attempt();
    if (!stopped) timer = setTimeout(() => void loop(), options.renewMs);
  };
  void loop();

  return {
    isLeader: () => leader,
    async stop({ release }) {
      stopped = true;
      clearTimeout(timer);
      if (leader && release) {
        try {
          await kv.delete(Keys.leader, { previousSeq: revision });
        } catch (err) {
          logger.warn({ err }, 'could not release the hub lease; it expires on its own');
        }
      }
      setLeader(false);
    },
  };
}
