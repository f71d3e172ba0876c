import { createHashSettings, hashOptionsProblem, type HashSettings } from '../sharding/index.js';
import type { ClusterReport, ReportedObject } from '../transport/index.js';

export function sameHashSettings(a: HashSettings, b: HashSettings): boolean {
  return a.algorithm === b.algorithm && a.bucketCount === b.bucketCount && a.labels.hash === b.labels.hash && a.labels.namespace === b.labels.namespace && a.labels.control === b.labels.control;
}

const describe = (h: HashSettings): string => `${h.algorithm} over ${h.bucketCount} buckets, label ${h.labels.hash}`;

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

/** The first object whose manifest names another object than the report lists it as, if any. */
function misnamed(objects: readonly ReportedObject[]): string | undefined {
  for (const { namespace, name, manifest } of objects) {
    const metadata = typeof manifest === 'object' && manifest !== null && 'metadata' in manifest ? manifest.metadata : undefined;
    const own = typeof metadata === 'object' && metadata !== null ? (metadata as { namespace?: unknown; name?: unknown }) : {};
    if (own.namespace !== namespace || own.name !== name) return `${namespace}/${name}`;
  }
  return undefined;
}

/**
 * Why the hub will not plan with a cluster's report, or undefined. A report is one member cluster's word: what no
 * honest agent sends (hash settings the planner cannot use, a pod running another cluster's shard, an object listed
 * twice or under another name) would make every planning pass of the whole fleet fail, or put addresses into other
 * clusters' route tables; so would hash settings other than the fleet's, where the hub was given them
 * (test/unit/hub/rogue-report.test.ts). Such a report is dropped whole and the cluster's last good one stays.
 */
export function reportProblem(report: ClusterReport, fleet?: HashSettings): string | undefined {
  const unusable = hashOptionsProblem(report.hash);
  if (unusable !== undefined) return unusable;
  const hash = createHashSettings(report.hash);
  if (fleet !== undefined && !sameHashSettings(hash, fleet)) {
    return `hash: the agent labels by ${describe(hash)}, the hub's fleet by ${describe(fleet)} (--hash-algorithm of both)`;
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
    const other = misnamed(objects);
    if (other !== undefined) return `${kind} ${other}: its manifest names another object`;
  }
  return undefined;
}
