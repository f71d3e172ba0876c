import { bucketsOfUnits, type UnitKey } from '../sharding/index.js';
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
}

/** The route table of one shard (pure). Clusters not registered (no endpoint known) are left out. */
export function buildRouteTable(options: BuildRouteTableOptions): RouteTable {
  const { plan, shard } = options;
  const buckets = bucketsOfUnits(options.units);
  const clusters = plan.clusters.flatMap((name) => {
    const identity = options.clusters.get(name);
    if (!identity) return [];
    return [
      {
        name,
        server: identity.server,
        caPem: identity.caPem,
        buckets: buckets.get(name) ?? [],
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
  };
}

/** Whether two tables say the same thing (version and issue time aside). */
export function sameRoutes(a: RouteTable, b: RouteTable): boolean {
  const strip = ({ version: _v, issuedAt: _i, ...rest }: RouteTable): unknown => rest;
  return JSON.stringify(strip(a)) === JSON.stringify(strip(b));
}
