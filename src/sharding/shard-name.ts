/**
 * A shard is named `<cluster>/<config>`: the same root or hand-written ShardingConfig applied in several clusters
 * is one operator (`<namespace>/<name>`) whose shards run in each of them. The hub names the shards it plans so,
 * and the agent's injector names the shard a pod serves so.
 */
export function shardName(cluster: string, config: string): string {
  return `${cluster}/${config}`;
}

/** The cluster a shard named by {@link shardName} runs in. */
export function homeClusterOf(shard: string): string {
  return shard.slice(0, shard.indexOf('/'));
}
