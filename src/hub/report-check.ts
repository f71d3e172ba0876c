import { InvalidConfigError } from '../errors.js';
import { createHashSettings } from '../sharding/index.js';
import type { ClusterReport } from '../transport/index.js';

/** The first object listed twice (by namespace and name), if any. */
function listedTwice(objects: readonly { namespace: string; name: string }[]): string | undefined {
  const seen = new Set<string>();
  for (const { namespace, name } of objects) {
    const key = `${namespace}/${name}`;
    if (seen.has(key)) return key;
    seen.add(key);
  }
  return undefined;
}

/**
 * Why the hub will not plan with a cluster's report, or undefined. A report is one member cluster's word: what no
 * honest agent sends (hash settings the planner cannot use, a pod running another cluster's shard, an object listed
 * twice) made every planning pass of the whole fleet fail, or put addresses into other clusters' route tables
 * (attacker probe, session 20). Such a report is dropped whole and the cluster's last good one stays.
 */
export function reportProblem(report: ClusterReport): string | undefined {
  try {
    createHashSettings(report.hash);
  } catch (err) {
    if (err instanceof InvalidConfigError) return `hash: ${err.message}`;
    throw err;
  }
  const foreign = report.pods.find((pod) => pod.shard !== undefined && !pod.shard.startsWith(`${report.cluster}/`));
  if (foreign) return `pod ${foreign.namespace}/${foreign.name} claims shard "${foreign.shard}" of another cluster`;
  for (const [kind, objects] of [
    ['ShardingConfig', report.shardingConfigs],
    ['CircuitBreaker', report.circuitBreakers],
    ['FaultInjection', report.faultInjections],
  ] as const) {
    const twice = listedTwice(objects);
    if (twice !== undefined) return `${kind} ${twice} is listed twice`;
  }
  return undefined;
}
