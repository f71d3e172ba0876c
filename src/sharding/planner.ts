import { balance } from './balance.js';
import { bucketOf, createHashSettings, InvalidConfigError } from './hash.js';
import type { Assignment, ClusterInfo, Move, OperatorInput, OperatorStats, PlanInput, PlanResult } from './plan-format.js';
import { compileSelector, matches } from './selector.js';

/**
 * Every unit costs one on top of its objects (a watch and its bookkeeping), so clusters that report no objects yet
 * are still spread by unit count rather than piled on one shard.
 */
export const UNIT_BASE_WEIGHT = 1;

const byName = (a: { name: string }, b: { name: string }): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

function sortedUnique<T extends { name: string }>(items: readonly T[], what: string): T[] {
  const sorted = [...items].sort(byName);
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i]?.name === sorted[i - 1]?.name) throw new InvalidConfigError(`${what} "${sorted[i]?.name}" is listed twice`);
  }
  return sorted;
}

/** The fleet-wide facts every operator's plan shares: clusters in name order and the weight of each unit. */
interface Fleet {
  clusters: ClusterInfo[];
  clusterIndex: Map<string, number>;
  bucketCount: number;
  /** Weight per unit, index = cluster index * bucketCount + bucket. */
  weights: Float64Array;
  offline: boolean[];
  moveOffline: boolean;
}

function buildFleet(input: PlanInput): Fleet {
  const settings = createHashSettings({ algorithm: input.hash?.algorithm, bucketCount: input.hash?.bucketCount });
  const clusters = sortedUnique(input.clusters, 'cluster');
  const clusterIndex = new Map(clusters.map((c, i) => [c.name, i]));
  const bucketCount = settings.bucketCount;
  const weights = new Float64Array(clusters.length * bucketCount).fill(UNIT_BASE_WEIGHT);
  const buckets = new Map<string, number>();
  for (const w of input.weights) {
    const ci = clusterIndex.get(w.cluster);
    if (ci === undefined) continue;
    let b = buckets.get(w.namespace);
    if (b === undefined) {
      b = bucketOf(w.namespace, settings);
      buckets.set(w.namespace, b);
    }
    const u = ci * bucketCount + b;
    weights[u] = (weights[u] as number) + w.objects;
  }
  return {
    clusters,
    clusterIndex,
    bucketCount,
    weights,
    offline: clusters.map((c) => c.health === 'Offline'),
    moveOffline: input.options?.moveUnitsOfOfflineClusters ?? false,
  };
}

interface OperatorPlan {
  shards: Record<string, Record<string, number[]>>;
  moves: Move[];
  unassigned: PlanResult['unassigned'];
  stats: OperatorStats;
}

/** Previous owner per unit (index into the sorted previous shard names), and moves for units that no longer exist. */
function previousOwners(fleet: Fleet, operator: string, previous: Assignment['operators'][string] | undefined) {
  const names = Object.keys(previous ?? {}).sort();
  const owner = new Int32Array(fleet.weights.length).fill(-1);
  const gone: Move[] = [];
  names.forEach((name, i) => {
    for (const [cluster, buckets] of Object.entries(previous?.[name] ?? {})) {
      const ci = fleet.clusterIndex.get(cluster);
      for (const bucket of buckets) {
        if (ci === undefined || bucket >= fleet.bucketCount) gone.push({ operator, cluster, bucket, from: name, to: null, weight: 0 });
        else owner[ci * fleet.bucketCount + bucket] = i;
      }
    }
  });
  return { names, owner, gone };
}

function planOperator(fleet: Fleet, op: OperatorInput, previous: Assignment['operators'][string] | undefined): OperatorPlan {
  const B = fleet.bucketCount;
  const shards = sortedUnique(op.shards, `shard of operator ${op.name}`);
  const prev = previousOwners(fleet, op.name, previous);
  const owner = new Int32Array(fleet.weights.length).fill(-1);
  const inScope = new Uint8Array(fleet.weights.length);
  const unassigned: PlanResult['unassigned'] = [];
  const home = shards.map((s) => fleet.clusterIndex.get(s.homeCluster));

  // Hand-written configs (and roots without clusters) own what their limits say, in their own cluster.
  shards.forEach((shard, si) => {
    const ci = home[si];
    for (const bucket of shard.buckets ?? []) {
      if (bucket >= B) throw new InvalidConfigError(`shard ${shard.name} of ${op.name}: bucket ${bucket} is not below the bucket count ${B}`);
      if (ci === undefined) {
        unassigned.push({ operator: op.name, cluster: shard.homeCluster, bucket, reason: `cluster ${shard.homeCluster} is not registered` });
        continue;
      }
      const u = ci * B + bucket;
      inScope[u] = 1;
      if (owner[u] === -1) owner[u] = si;
    }
  });

  const planned = shards.map((_, si) => si).filter((si) => shards[si]?.buckets === undefined);
  if (planned.length > 0) {
    let universe: number[];
    if (op.clusters) {
      const selector = compileSelector(op.clusters);
      universe = fleet.clusters.map((_, ci) => ci).filter((ci) => matches(selector, fleet.clusters[ci]?.labels ?? {}));
    } else {
      universe = [...new Set(planned.map((si) => home[si]).filter((ci): ci is number => ci !== undefined))].sort((a, b) => a - b);
    }
    const partitions = op.multicluster ? [universe] : universe.map((ci) => [ci]);
    const prevIndex = new Map(prev.names.map((n, i) => [n, i]));
    for (const partition of partitions) {
      const eligible = planned.filter((si) => {
        const ci = home[si];
        if (ci === undefined) return false;
        if (fleet.moveOffline && fleet.offline[ci]) return false;
        return op.multicluster === true || ci === partition[0];
      });
      const units: number[] = [];
      for (const ci of partition) {
        for (let b = 0; b < B; b++) {
          const u = ci * B + b;
          if (owner[u] !== -1) continue;
          inScope[u] = 1;
          units.push(u);
        }
      }
      if (eligible.length === 0) {
        for (const u of units) {
          const cluster = fleet.clusters[Math.floor(u / B)]?.name as string;
          unassigned.push({
            operator: op.name,
            cluster,
            bucket: u % B,
            reason: op.multicluster ? 'no shard is running in a cluster that is not Offline' : `no shard runs in cluster ${cluster} and the operator is not multicluster`,
          });
        }
        continue;
      }
      const toLocal = new Int32Array(prev.names.length).fill(-1);
      eligible.forEach((si, k) => {
        const j = prevIndex.get(shards[si]?.name as string);
        if (j !== undefined) toLocal[j] = k;
      });
      const weights = new Float64Array(units.length);
      const previousLocal = new Int32Array(units.length);
      units.forEach((u, k) => {
        weights[k] = fleet.weights[u] as number;
        const p = prev.owner[u] as number;
        previousLocal[k] = p >= 0 ? (toLocal[p] as number) : -1;
      });
      const joined = previous
        ? eligible.map((si, k) => (prevIndex.has(shards[si]?.name as string) ? -1 : k)).filter((k) => k >= 0)
        : [];
      const local = balance({ weights, shardCount: eligible.length, previous: previousLocal, joined });
      units.forEach((u, k) => {
        const l = local[k] as number;
        if (l >= 0) owner[u] = eligible[l] as number;
      });
    }
  }

  const result: Record<string, Record<string, number[]>> = {};
  const loads: Record<string, number> = {};
  for (const shard of shards) {
    result[shard.name] = {};
    loads[shard.name] = 0;
  }
  const moves: Move[] = [];
  let totalWeight = 0;
  let heaviestUnit = 0;
  let movedWeight = 0;
  let unitCount = 0;
  for (let u = 0; u < owner.length; u++) {
    const p = prev.owner[u] as number;
    if (!inScope[u] && p < 0) continue;
    const o = owner[u] as number;
    const w = fleet.weights[u] as number;
    const cluster = fleet.clusters[Math.floor(u / B)]?.name as string;
    const bucket = u % B;
    const from = p >= 0 ? (prev.names[p] as string) : null;
    const to = o >= 0 ? (shards[o]?.name as string) : null;
    if (inScope[u]) {
      unitCount++;
      totalWeight += w;
      if (w > heaviestUnit) heaviestUnit = w;
    }
    if (to !== null) {
      const byCluster = result[to] as Record<string, number[]>;
      (byCluster[cluster] ??= []).push(bucket);
      loads[to] = (loads[to] as number) + w;
    }
    if (from !== to) {
      moves.push({ operator: op.name, cluster, bucket, from, to, weight: w });
      movedWeight += w;
    }
  }
  moves.push(...prev.gone);
  return { shards: result, moves, unassigned, stats: { units: unitCount, totalWeight, heaviestUnit, movedWeight, loads } };
}

/**
 * The cross-cluster planner: for each operator, the (cluster, bucket) units each shard owns and the moves from the
 * previous assignment. Pure and deterministic: inputs are sorted by name first, so their order does not matter.
 * Units of hand-written shards are fixed; the rest are balanced by {@link balance} per reachable group (all
 * clusters at once for a multicluster operator, else each cluster among the shards running in it).
 */
export function plan(input: PlanInput, previous?: Assignment): PlanResult {
  const fleet = buildFleet(input);
  const result: PlanResult = { assignment: { operators: {} }, moves: [], unassigned: [], stats: {} };
  for (const op of sortedUnique(input.operators, 'operator')) {
    const planned = planOperator(fleet, op, previous?.operators[op.name]);
    result.assignment.operators[op.name] = planned.shards;
    result.moves.push(...planned.moves);
    result.unassigned.push(...planned.unassigned);
    result.stats[op.name] = planned.stats;
  }
  for (const [name, shards] of Object.entries(previous?.operators ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (name in result.assignment.operators) continue;
    // An operator that disappeared gives back everything it owned.
    for (const [shard, clusters] of Object.entries(shards)) {
      for (const [cluster, buckets] of Object.entries(clusters)) {
        for (const bucket of buckets) result.moves.push({ operator: name, cluster, bucket, from: shard, to: null, weight: 0 });
      }
    }
  }
  return result;
}
