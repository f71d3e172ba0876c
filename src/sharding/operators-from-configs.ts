import type { ShardingConfigModel } from '../api/index.js';
import { shardsOfConfigs, type ConfigHome, type ConfigShard, type ConfigShards } from './config-shards.js';
import type { OperatorInput } from './plan-format.js';

/**
 * The planner's input for one config's shards, each named by `nameOf` (default: its config name): a fixed shard
 * keeps its buckets in its home cluster, a planned one has none, so the planner places it.
 */
export function operatorInput(meaning: ConfigShards, nameOf: (shard: ConfigShard) => string = (s) => s.config): OperatorInput {
  const { homeCluster } = meaning;
  const operator: OperatorInput = {
    name: meaning.operator,
    multicluster: meaning.multicluster,
    shards: meaning.shards.map((s) => (s.buckets === 'planned' ? { name: nameOf(s), homeCluster } : { name: nameOf(s), homeCluster, buckets: s.buckets })),
  };
  if (meaning.clusters) operator.clusters = meaning.clusters;
  return operator;
}

/**
 * Planner input for the ShardingConfigs of one cluster (`shardsOfConfigs`), shards named by their config. A root
 * with `spec.root.clusters` spans the matching clusters and its normal shards are planned (its canary keeps its
 * buckets); a root without it, and every hand-written config, keeps the buckets KusionStack would give it, in its
 * own cluster.
 */
export function operatorsFromConfigs(configs: readonly ShardingConfigModel[], home: ConfigHome): OperatorInput[] {
  return shardsOfConfigs(configs, home).map((meaning) => operatorInput(meaning));
}
