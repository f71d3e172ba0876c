import type { KV } from '@nats-io/kv';
import type { Logger } from 'pino';
import type { HubMetrics } from '../metrics/index.js';
import type { Ownership } from '../sharding/index.js';
import {
  Buckets,
  Keys,
  MESSAGE_SCHEMA_VERSION,
  Messages,
  encodeMessage,
  publishSealedRouteTable,
  RouteTableKind,
  type RouteSigner,
  type ClusterIdentity,
  type HandoverRecord,
  type HandoverStateRecord,
  type KeptBuckets,
  type RouteTable,
} from '../transport/index.js';
import type { CorruptEntry, Fleet, PublishedRoute } from './fleet.js';
import { EMPTY_HANDOVER_STATE, handoverStep } from './handover.js';
import { handoverStateFromTables } from './handover-recovery.js';
import type { RevocationClock } from './revocation-clock.js';
import { nextTableVersion } from './table-version.js';
import type { FleetPlan, OperatorPlan } from './plan.js';
import { buildRouteTable, sameRoutes } from './route-builder.js';

export interface ReconcileContext {
  fleet: Fleet;
  routes: KV;
  /** Signs every table published. */
  signer: RouteSigner;
  state: KV;
  leaseSeconds: number;
  /** Added to the lease before a revoked unit is granted without acknowledgement. */
  grantMarginMs: number;
  /** When this hub became leader, on `monotonic` (lease expiry is counted from no earlier). */
  leaderSince: number;
  /** The hub's wall clock, read again once the tables of a step are recorded (for the `revokedAt` people read). */
  clock: () => number;
  /** The hub's monotonic clock: every grant by expiry and every deadline is timed on it. */
  monotonic: () => number;
  /** When this process first saw each pending revocation (kept across passes). */
  revocations: RevocationClock;
  historyLimit: number;
  logger: Logger;
  metrics: HubMetrics;
  /**
   * The control buckets, checked before this pass writes anything, to bring back those deleted under the running
   * hub (the planning loop passes them when a check is due). Absent: no check this pass.
   */
  buckets?: Pick<KeptBuckets, 'restore' | 'clusters'>;
}

export interface ReconcileResult {
  published: RouteTable[];
  /** When to run again for a pending handover's lease expiry, or to retry a failed write (on `monotonic`). */
  nextDeadline?: number;
  /**
   * Some operator's tables or handover record could not be written, or the buckets could not be checked: a bucket
   * may have gone or been created again, so the next pass checks them first.
   */
  failed: boolean;
}

/**
 * One leader pass: for each operator, move the granted units toward the plan (see handover.ts) and publish every
 * shard's route table whose content changed, each at `nextTableVersion` (above the previous one and at least the
 * clock in ms, so versions never go backwards) with compare-and-set.
 */
export async function reconcile(ctx: ReconcileContext, plan: FleetPlan, now: number): Promise<ReconcileResult> {
  const published: RouteTable[] = [];
  const deadlines: number[] = [];
  let failed = ctx.buckets !== undefined && !(await restoreBuckets(ctx, ctx.buckets));
  const planned = new Map(plan.operators.map((p) => [p.operator, p]));
  const frozen = new Set(plan.frozen);
  // Operators that were published before and are no longer planned lose all their units.
  for (const operator of ctx.fleet.routes.keys()) {
    if (!planned.has(operator) && !frozen.has(operator)) planned.set(operator, withdrawnPlan(ctx, operator));
  }
  // Operators share no key and no record: their writes go out together, so a change costs one round trip per
  // step rather than one per table.
  const operators = [...planned.values()].filter((p) => !frozen.has(p.operator));
  const at = ctx.monotonic();
  const results = await Promise.allSettled(operators.map((p) => reconcileOperator(ctx, p, now, at)));
  results.forEach((result, i) => {
    if (result.status === 'fulfilled') {
      published.push(...result.value.published);
      if (result.value.nextDeadline !== undefined) deadlines.push(result.value.nextDeadline);
    } else {
      ctx.logger.warn({ err: result.reason, operator: operators[i]?.operator }, 'could not publish route tables; retrying on the next change');
      deadlines.push(at + 1_000);
      failed = true;
    }
  });
  let pending = 0;
  for (const { record } of ctx.fleet.handovers.values()) pending += record.pending.length;
  ctx.metrics.pendingHandovers.set(pending);
  return { published, failed, ...(deadlines.length ? { nextDeadline: Math.min(...deadlines) } : {}) };
}

function withdrawnPlan(ctx: ReconcileContext, operator: string): OperatorPlan {
  const any = [...(ctx.fleet.routes.get(operator)?.values() ?? [])][0]?.table;
  return {
    operator,
    hashAlgorithm: any?.hashAlgorithm ?? 'kusionstack',
    bucketCount: any?.bucketCount ?? 32,
    labels: any?.labels ?? { hash: '', namespace: '', control: '' },
    clusters: any?.clusters.map((c) => c.name) ?? [],
    shards: [],
  };
}

async function reconcileOperator(ctx: ReconcileContext, plan: OperatorPlan, now: number, at: number): Promise<Omit<ReconcileResult, 'failed'>> {
  const { fleet } = ctx;
  const previous = fleet.handovers.get(plan.operator);
  const corrupt = fleet.corruptHandovers.get(plan.operator);
  if (corrupt) await quarantine(ctx, corrupt);
  const routes = fleet.routes.get(plan.operator) ?? new Map<string, PublishedRoute>();
  const desired: Ownership = Object.fromEntries(plan.shards.map((s) => [s.name, s.units]));
  const versions: Record<string, number> = Object.fromEntries([...routes].map(([shard, r]) => [shard, r.table.version]));
  // Judged against the table they acknowledge: an ack above the published version proves nothing (stored acks
  // are read back before the tables, so Fleet.recordAck cannot always tell).
  const acks = Object.fromEntries([...(fleet.acks.get(plan.operator) ?? [])].filter(([shard, v]) => v <= (versions[shard] ?? -1)));
  // No record (malformed, deleted, or its bucket lost) while tables are published: start from what they grant.
  const recovered = previous === undefined && routes.size > 0;
  if (recovered) ctx.logger.warn({ operator: plan.operator }, 'no valid handover record: rebuilding it from the published route tables');
  const step = handoverStep({
    state: previous?.record ?? (recovered ? handoverStateFromTables({ tables: [...routes.values()].map((r) => r.table), acks, desired, now }) : EMPTY_HANDOVER_STATE),
    desired,
    versions,
    acks,
    serving: new Set(fleet.acks.get(plan.operator)?.keys() ?? []),
    now,
    monotonicNow: at,
    revokedSeenAt: (record) => ctx.revocations.seenAt(plan.operator, record, at),
    leaseMs: ctx.leaseSeconds * 1000,
    marginMs: ctx.grantMarginMs,
    leaderSince: ctx.leaderSince,
    historyLimit: ctx.historyLimit,
  });

  const identities = new Map<string, ClusterIdentity>([...fleet.clusters].map(([name, r]) => [name, r.cluster]));
  const shardPlans = new Map(plan.shards.map((s) => [s.name, s]));
  const shards = new Set([...Object.keys(step.state.effective), ...shardPlans.keys(), ...routes.keys()]);
  const changed: { table: RouteTable; revision: number }[] = [];
  for (const shard of [...shards].sort()) {
    const prev = routes.get(shard);
    const table = buildRouteTable({
      plan,
      shard: shardPlans.get(shard),
      shardName: shard,
      units: step.state.effective[shard] ?? [],
      granted: step.state.effective,
      clusters: identities,
      version: nextTableVersion(prev?.table.version, now),
      now: new Date(now),
      leaseSeconds: ctx.leaseSeconds,
      ...(prev ? { previousHome: prev.table.homeCluster } : {}),
    });
    // Revision 0: its bucket was created again, so the table is written again even though nothing changed.
    if (prev && prev.revision > 0 && !step.changedShards.includes(shard) && sameRoutes(prev.table, table)) continue;
    changed.push({ table, revision: prev?.revision ?? 0 });
  }
  // Order does not matter within one step (a unit revoked in this step is granted in a later one): the tables are
  // written at once. Every write that succeeded is recorded; if one failed, the handover record stays as it was and
  // the pass is retried.
  const writes = await Promise.allSettled(
    changed.map(async ({ table, revision: at }) => {
      const sealed = ctx.signer.seal(RouteTableKind, table);
      const written = fleet.writingRoute(table, sealed);
      const revision = await publishSealedRouteTable(ctx.routes, table, sealed, at).finally(written);
      fleet.recordRoute(table, revision, sealed);
      ctx.metrics.routeTablesPublished.inc({ operator: plan.operator });
      return table;
    }),
  );
  const failed = writes.find((w): w is PromiseRejectedResult => w.status === 'rejected');
  if (failed) throw failed.reason as Error;
  const published = writes.flatMap((w) => (w.status === 'fulfilled' ? [w.value] : []));

  // A revocation counts from when its table is recorded, not from when it was decided: until then renewals are
  // judged against the shard's previous version and may still be extended, and a grant by expiry must wait for
  // the last of those extensions to run out. Counted on the monotonic clock; the wall `revokedAt` is for people.
  const decidedNow = (p: HandoverRecord): boolean => p.revokedAt === now && !previous?.record.pending.some((q) => q.unit === p.unit && q.revokedAt === now);
  const decided = step.state.pending.some(decidedNow);
  const recordedAt = decided ? Math.max(now, ctx.clock()) : now;
  const recordedMonotonic = decided ? Math.max(at, ctx.monotonic()) : at;
  for (const p of step.state.pending) if (decidedNow(p)) ctx.revocations.recorded(plan.operator, p, recordedMonotonic);
  const pending = step.state.pending.map((p) => (decidedNow(p) ? { ...p, revokedAt: recordedAt } : p));
  const record: HandoverStateRecord = { schema: MESSAGE_SCHEMA_VERSION, operator: plan.operator, ...step.state, pending };
  if (!previous || previous.revision === 0 || JSON.stringify(record) !== JSON.stringify(previous.record)) {
    const data = encodeMessage(Messages.handoverState, record);
    const key = Keys.handover(plan.operator);
    // Over a malformed value at its revision; created when there is none (or its bucket was created again).
    const at = previous?.revision || corrupt?.revision || 0;
    const revision = at > 0 ? await ctx.state.update(key, data, at) : await ctx.state.create(key, data);
    const fresh = newlyDone(previous?.record, record);
    for (const done of fresh === 0 ? [] : record.history.slice(-fresh)) {
      if (done.grantedBy) ctx.metrics.handovers.inc({ granted_by: done.grantedBy });
    }
    fleet.recordHandover(record, revision);
  }
  ctx.revocations.retain(plan.operator, pending);
  return { published, ...(step.nextDeadline !== undefined ? { nextDeadline: step.nextDeadline + (recordedMonotonic - at) } : {}) };
}

/** Copies a malformed value aside (same bucket, its key and revision in the name) before it is replaced. */
async function quarantine(ctx: ReconcileContext, entry: CorruptEntry): Promise<void> {
  const key = Keys.quarantine(entry.key, entry.revision);
  await ctx.state.put(key, entry.value);
  ctx.logger.warn({ key: entry.key, revision: entry.revision, quarantine: key }, 'copied a malformed record aside; replacing it');
}

/**
 * Re-creates deleted buckets and, for every bucket created again (by this hub or another process), forgets the
 * revisions known in it and writes back what only the leader's memory still holds (registry and reports); the
 * route tables and handover records are written again by the pass itself. NATS unreachable: nothing to do (false).
 */
async function restoreBuckets(ctx: ReconcileContext, buckets: NonNullable<ReconcileContext['buckets']>): Promise<boolean> {
  let fresh: string[];
  try {
    fresh = await buckets.restore();
  } catch (err) {
    ctx.logger.warn({ err }, 'could not check the KV buckets; trying again on the next pass');
    return false;
  }
  for (const bucket of fresh) {
    ctx.logger.warn({ bucket }, 'KV bucket created again: writing back what it held');
    if (bucket === Buckets.routes || bucket === Buckets.state) ctx.fleet.forgetRevisions(bucket);
  }
  try {
    if (fresh.includes(Buckets.clusters)) {
      for (const [name, record] of ctx.fleet.clusters) await buckets.clusters.put(Keys.cluster(name), encodeMessage(Messages.clusterRecord, record));
    }
    if (fresh.includes(Buckets.state)) {
      for (const [cluster, report] of ctx.fleet.reports) await ctx.state.put(Keys.report(cluster), encodeMessage(Messages.clusterReport, report));
    }
  } catch (err) {
    ctx.logger.warn({ err }, 'could not write back the registry or the reports into a bucket created again');
  }
  return true;
}

/** How many history entries are new in `next` compared with `prev`. */
function newlyDone(prev: HandoverStateRecord | undefined, next: HandoverStateRecord): number {
  const last = prev?.history.at(-1);
  if (!last) return next.history.length;
  const index = next.history.findIndex((h) => h.unit === last.unit && h.grantedAt === last.grantedAt);
  return index < 0 ? next.history.length : next.history.length - index - 1;
}
