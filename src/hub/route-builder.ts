import { bucketsOfUnits, objectSelection, type Ownership, type UnitKey } from '../sharding/index.js';
import { ROUTE_TABLE_SCHEMA_VERSION, type ClusterIdentity, type RouteTable } from '../transport/index.js';
import type { OperatorPlan, ShardPlan } from './plan.js';

export interface BuildRouteTableOptions {
  plan: OperatorPlan;
  /** Undefined for a shard that is no longer planned: it gets a table owning nothing. */
  shard: ShardPlan | undefined;
  shardName: string;
  /** The units the shard is granted now (may lag the plan while handovers are pending). */
  units: readonly UnitKey[];
  clusters: ReadonlyMap<string, ClusterIdentity>;
  version: number;
  now: Date;
  leaseSeconds: number;
  /** Home cluster of a shard that is no longer planned (from its last table). */
  previousHome?: string;
  /** What every shard of the operator is granted now: the `bucketOwners` of a webhook operator's tables. */
  granted?: Ownership;
}

/** Per cluster, the shard granted each bucket, except `shard`'s own (units in flight belong to nobody). */
function bucketOwners(granted: Ownership, shard: string): Map<string, Record<string, string>> {
  const owners = new Map<string, Record<string, string>>();
  for (const [owner, units] of Object.entries(granted)) {
    if (owner === shard) continue;
    for (const [cluster, buckets] of bucketsOfUnits(units)) {
      const record = owners.get(cluster) ?? {};
      for (const bucket of buckets) record[String(bucket)] = owner;
      owners.set(cluster, record);
    }
  }
  return owners;
}

/** The route table of one shard (pure). Clusters not registered (no endpoint known) are left out. */
export function buildRouteTable(options: BuildRouteTableOptions): RouteTable {
  const { plan, shard } = options;
  const buckets = bucketsOfUnits(options.units);
  // Only a webhook operator's tables name the owners: the others stay as they were before webhooks.
  const owners = plan.webhook ? bucketOwners(options.granted ?? {}, options.shardName) : undefined;
  const clusters = plan.clusters.flatMap((name) => {
    const identity = options.clusters.get(name);
    if (!identity) return [];
    const selection = objectSelection({
      algorithm: plan.hashAlgorithm,
      serverShardSelectors: plan.shardSelectorClusters?.includes(name) ?? false,
      objectLabels: plan.objectLabels ?? 'Auto',
    });
    return [
      {
        name,
        server: identity.server,
        caPem: identity.caPem,
        buckets: buckets.get(name) ?? [],
        ...(owners ? { bucketOwners: owners.get(name) ?? {} } : {}),
        // Absent for labels, so a labelled cluster's route is byte for byte what it was before selections existed.
        ...(selection === 'labels' ? {} : { selection }),
        ...(plan.objectSharding ? { objectSharding: plan.objectSharding } : {}),
        ...(plan.unshardedWrites ? { unshardedWrites: plan.unshardedWrites } : {}),
        limits: shard?.limits ?? [],
      },
    ];
  });
  return {
    schema: ROUTE_TABLE_SCHEMA_VERSION,
    operator: plan.operator,
    shard: options.shardName,
    version: options.version,
    issuedAt: options.now.toISOString(),
    homeCluster: shard?.homeCluster ?? options.previousHome ?? plan.clusters[0] ?? 'unknown',
    ...(shard?.leaderElectionName ? { leaderElectionName: shard.leaderElectionName } : {}),
    hashAlgorithm: plan.hashAlgorithm,
    bucketCount: plan.bucketCount,
    labels: plan.labels,
    leaseSeconds: options.leaseSeconds,
    clusters,
    // Only when there are some: a table without rules stays byte for byte what it was before rules existed.
    ...(shard?.rules?.length ? { rules: shard.rules } : {}),
    ...(plan.webhook ? { webhook: plan.webhook } : {}),
  };
}

/** Whether two tables say the same thing (version and issue time aside). */
export function sameRoutes(a: RouteTable, b: RouteTable): boolean {
  const strip = ({ version: _v, issuedAt: _i, ...rest }: RouteTable): unknown => rest;
  return JSON.stringify(strip(a)) === JSON.stringify(strip(b));
}
