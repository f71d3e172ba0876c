import type { ObjectLabels, ResourceGroup } from '../api/index.js';
import type { UnitKey } from '../sharding/index.js';
import type { ClusterRoute, RouteTable, TableRule, TableWebhook } from '../transport/index.js';

/** One shard of an operator as planned: which units it should own and what its route table says besides. */
export interface ShardPlan {
  name: string;
  homeCluster: string;
  leaderElectionName?: string;
  limits: ClusterRoute['limits'];
  units: UnitKey[];
  /**
   * The valid CircuitBreakers and FaultInjections of the operator's namespace in the shard's home cluster, sorted by
   * kind then name (absent or empty: none; the table then carries no `rules`).
   */
  rules?: TableRule[];
}

/** Everything the hub publishes for one operator. */
export interface OperatorPlan {
  operator: string;
  hashAlgorithm: RouteTable['hashAlgorithm'];
  bucketCount: number;
  labels: RouteTable['labels'];
  /** Clusters the operator spans (every shard's table lists them, with the buckets it owns there). */
  clusters: string[];
  shards: ShardPlan[];
  /** For an operator whose ShardingConfig has `spec.webhook`: its port and every shard's ready pod IPs. */
  webhook?: TableWebhook;
  /** Its ShardingConfig's `spec.objectLabels` (absent: Auto); with the next field, each cluster route's `selection`. */
  objectLabels?: ObjectLabels;
  /** The clusters it spans whose agents last reported an API server that filters by shard selector (absent: none). */
  shardSelectorClusters?: string[];
  /** Its ShardingConfig's `spec.objectSharding` (absent: none). */
  objectSharding?: ResourceGroup[];
  /** Its ShardingConfig's `spec.unshardedWrites` (absent: none). */
  unshardedWrites?: ResourceGroup[];
}

/** The result of planning: operators whose configs are valid, and those kept as they were (invalid input). */
export interface FleetPlan {
  operators: OperatorPlan[];
  /** Operators with an invalid ShardingConfig: their published tables stay in force. */
  frozen: string[];
  /** Clusters whose stored report hashes otherwise than the hub's --hash-algorithm: while any, every operator is frozen. */
  outOfStep?: string[];
  /** ShardingConfigs the hub's --operator-file does not admit (an operator not listed, or not with that cluster): left out. */
  notAdmitted?: { operator: string; cluster: string }[];
}
