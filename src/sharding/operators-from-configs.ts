import type { ShardingConfigModel, ShardLimit } from '../api/index.js';
import { expandRoot } from './auto-sharding.js';
import { bucketOf, type HashSettings } from './hash.js';
import type { OperatorInput } from './plan-format.js';
import { compileSelector } from './selector.js';

/**
 * The buckets a hand-written shard's limits confine it to: hash In/NotIn narrow the set directly, namespace In
 * narrows it to those namespaces' buckets; a limit that says neither covers every bucket. Limits are alternatives,
 * so their sets are united.
 */
export function bucketsOfLimits(limits: readonly ShardLimit[], settings: HashSettings): number[] {
  const all = Array.from({ length: settings.bucketCount }, (_, i) => i);
  if (limits.length === 0) return all;
  const owned = new Set<number>();
  for (const limit of limits) {
    let allowed = new Set(all);
    for (const req of compileSelector(limit.selector)) {
      const isHash = req.key === settings.labels.hash;
      if (!isHash && req.key !== settings.labels.namespace) continue;
      const named = new Set(req.values.map((v) => (isHash ? Number(v) : bucketOf(v, settings))));
      if (req.operator === 'In') allowed = new Set([...allowed].filter((b) => named.has(b)));
      else if (req.operator === 'NotIn' && isHash) allowed = new Set([...allowed].filter((b) => !named.has(b)));
      else if (req.operator === 'DoesNotExist') allowed = new Set();
    }
    for (const b of allowed) owned.add(b);
  }
  return [...owned].sort((a, b) => a - b);
}

/**
 * Planner input for the ShardingConfigs of one cluster. A root with `spec.root.clusters` spans the matching clusters
 * and its normal shards are planned (its canary keeps its buckets); a root without it, and every hand-written
 * config, keeps the buckets KusionStack would give it, in its own cluster. Children a root generated are skipped
 * when listed, since the root stands for them.
 */
export function operatorsFromConfigs(
  configs: readonly ShardingConfigModel[],
  context: { homeCluster: string; settings: HashSettings },
): OperatorInput[] {
  const { homeCluster, settings } = context;
  const operators: OperatorInput[] = [];
  const generated = new Set<string>();
  for (const config of configs) {
    if (!config.root) continue;
    const children = expandRoot(config, settings);
    for (const child of children) generated.add(`${config.namespace}/${child.config.name}`);
    const planned = config.root.clusters !== undefined;
    const operator: OperatorInput = {
      name: `${config.namespace}/${config.name}`,
      multicluster: config.controller?.multicluster ?? false,
      shards: children.map((child) =>
        planned && child.role === 'normal'
          ? { name: child.config.name, homeCluster }
          : { name: child.config.name, homeCluster, buckets: child.buckets },
      ),
    };
    if (config.root.clusters) operator.clusters = config.root.clusters;
    operators.push(operator);
  }
  for (const config of configs) {
    const id = `${config.namespace}/${config.name}`;
    if (config.root || generated.has(id)) continue;
    operators.push({
      name: id,
      multicluster: config.controller?.multicluster ?? false,
      shards: [{ name: config.name, homeCluster, buckets: bucketsOfLimits(config.limits, settings) }],
    });
  }
  return operators;
}
