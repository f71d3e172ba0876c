import type { KV } from '@nats-io/kv';
import type { Logger } from 'pino';
import type { HubMetrics } from '../metrics/index.js';
import {
  Keys,
  MESSAGE_SCHEMA_VERSION,
  Messages,
  encodeMessage,
  publishRouteTable,
  type RouteSigner,
  type ClusterIdentity,
  type HandoverStateRecord,
  type RouteTable,
} from '../transport/index.js';
import type { Fleet } from './fleet.js';
import { EMPTY_HANDOVER_STATE, handoverStep, type Ownership } from './handover.js';
import type { FleetPlan, OperatorPlan } from './plan.js';
import { buildRouteTable, sameRoutes } from './route-builder.js';

export interface ReconcileContext {
  fleet: Fleet;
  routes: KV;
  /** Signs every table published. */
  signer: RouteSigner;
  state: KV;
  leaseSeconds: number;
  historyLimit: number;
  logger: Logger;
  metrics: HubMetrics;
}

export interface ReconcileResult {
  published: RouteTable[];
  /** When to run again for a pending handover's lease expiry. */
  nextDeadline?: number;
}

/**
 * One leader pass: for each operator, move the granted units toward the plan (see handover.ts) and publish every
 * shard's route table whose content changed, each at its previous version + 1 with compare-and-set.
 */
export async function reconcile(ctx: ReconcileContext, plan: FleetPlan, now: number): Promise<ReconcileResult> {
  const published: RouteTable[] = [];
  const deadlines: number[] = [];
  const planned = new Map(plan.operators.map((p) => [p.operator, p]));
  const frozen = new Set(plan.frozen);
  // Operators that were published before and are no longer planned lose all their units.
  for (const operator of ctx.fleet.routes.keys()) {
    if (!planned.has(operator) && !frozen.has(operator)) planned.set(operator, withdrawnPlan(ctx, operator));
  }
  for (const operatorPlan of planned.values()) {
    if (frozen.has(operatorPlan.operator)) continue;
    try {
      const result = await reconcileOperator(ctx, operatorPlan, now);
      published.push(...result.published);
      if (result.nextDeadline !== undefined) deadlines.push(result.nextDeadline);
    } catch (err) {
      ctx.logger.warn({ err, operator: operatorPlan.operator }, 'could not publish route tables; retrying on the next change');
      deadlines.push(now + 1_000);
    }
  }
  let pending = 0;
  for (const { record } of ctx.fleet.handovers.values()) pending += record.pending.length;
  ctx.metrics.pendingHandovers.set(pending);
  return { published, ...(deadlines.length ? { nextDeadline: Math.min(...deadlines) } : {}) };
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

async function reconcileOperator(ctx: ReconcileContext, plan: OperatorPlan, now: number): Promise<ReconcileResult> {
  const { fleet } = ctx;
  const previous = fleet.handovers.get(plan.operator);
  const routes = fleet.routes.get(plan.operator) ?? new Map();
  const desired: Ownership = Object.fromEntries(plan.shards.map((s) => [s.name, s.units]));
  const versions = Object.fromEntries([...routes].map(([shard, r]) => [shard, r.table.version]));
  const acks = Object.fromEntries(fleet.acks.get(plan.operator) ?? []);
  const step = handoverStep({
    state: previous?.record ?? EMPTY_HANDOVER_STATE,
    desired,
    versions,
    acks,
    now,
    leaseMs: ctx.leaseSeconds * 1000,
    historyLimit: ctx.historyLimit,
  });

  const identities = new Map<string, ClusterIdentity>([...fleet.clusters].map(([name, r]) => [name, r.cluster]));
  const shardPlans = new Map(plan.shards.map((s) => [s.name, s]));
  const shards = new Set([...Object.keys(step.state.effective), ...shardPlans.keys(), ...routes.keys()]);
  const published: RouteTable[] = [];
  // Order does not matter within one step: a unit revoked in this step is granted in a later one.
  for (const shard of [...shards].sort()) {
    const prev = routes.get(shard);
    const table = buildRouteTable({
      plan,
      shard: shardPlans.get(shard),
      shardName: shard,
      units: step.state.effective[shard] ?? [],
      clusters: identities,
      version: (prev?.table.version ?? 0) + 1,
      now: new Date(now),
      leaseSeconds: ctx.leaseSeconds,
      ...(prev ? { previousHome: prev.table.homeCluster } : {}),
    });
    if (prev && !step.changedShards.includes(shard) && sameRoutes(prev.table, table)) continue;
    const revision = await publishRouteTable(ctx.routes, ctx.signer, table, prev?.revision ?? 0);
    fleet.recordRoute(table, revision);
    ctx.metrics.routeTablesPublished.inc({ operator: plan.operator });
    published.push(table);
  }

  const record: HandoverStateRecord = { schema: MESSAGE_SCHEMA_VERSION, operator: plan.operator, ...step.state };
  if (JSON.stringify(record) !== JSON.stringify(previous?.record)) {
    const data = encodeMessage(Messages.handoverState, record);
    const key = Keys.handover(plan.operator);
    const revision = previous ? await ctx.state.update(key, data, previous.revision) : await ctx.state.create(key, data);
    const fresh = newlyDone(previous?.record, record);
    for (const done of fresh === 0 ? [] : record.history.slice(-fresh)) {
      if (done.grantedBy) ctx.metrics.handovers.inc({ granted_by: done.grantedBy });
    }
    fleet.handovers.set(plan.operator, { record, revision });
  }
  return { published, ...(step.nextDeadline !== undefined ? { nextDeadline: step.nextDeadline } : {}) };
}

/** How many history entries are new in `next` compared with `prev`. */
function newlyDone(prev: HandoverStateRecord | undefined, next: HandoverStateRecord): number {
  const last = prev?.history.at(-1);
  if (!last) return next.history.length;
  const index = next.history.findIndex((h) => h.unit === last.unit && h.grantedAt === last.grantedAt);
  return index < 0 ? next.history.length : next.history.length - index - 1;
}
