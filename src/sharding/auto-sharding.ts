import type { LabelSelector, LabelSelectorRequirement, ShardingConfigModel, ShardLimit } from '../api/index.js';
import type { HashSettings } from './hash.js';

/** The StatefulSet controller's per-pod label; children select their pods by it. */
export const POD_NAME_LABEL = 'statefulset.kubernetes.io/pod-name';

/** One child of an auto-sharding root. */
export interface AutoShard {
  role: 'canary' | 'normal';
  /** The generated ShardingConfig (`<prefix>-0-canary`, `<prefix>-<i>-normal`). */
  config: ShardingConfigModel;
  /** Ordinals of the target StatefulSet's pods that run this shard. */
  podOrdinals: number[];
  /** Buckets this shard owns by hash (the canary also owns its namespaces, whatever their bucket). */
  buckets: number[];
}

function range(from: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => from + i);
}

function withRequirements(limit: ShardLimit, extra: LabelSelectorRequirement[]): ShardLimit {
  const selector: LabelSelector = { ...limit.selector, matchExpressions: [...(limit.selector.matchExpressions ?? []), ...extra] };
  return { relateResources: limit.relateResources, selector };
}

function podSelector(root: ShardingConfigModel, ordinals: number[]): LabelSelector {
  const statefulSet = root.root?.targetStatefulSet as string;
  return {
    ...root.selector,
    matchExpressions: [
      ...(root.selector.matchExpressions ?? []),
      { key: POD_NAME_LABEL, operator: 'In', values: ordinals.map((o) => `${statefulSet}-${o}`) },
    ],
  };
}

function child(root: ShardingConfigModel, of: { name: string; ordinals: number[]; limits: ShardLimit[] }): ShardingConfigModel {
  const config: ShardingConfigModel = {
    kind: 'ShardingConfig',
    name: of.name,
    namespace: root.namespace,
    selector: podSelector(root, of.ordinals),
    limits: of.limits,
    objectLabels: root.objectLabels,
    objectSharding: root.objectSharding,
    unshardedWrites: root.unshardedWrites,
  };
  if (root.controller) config.controller = { ...root.controller };
  if (root.webhook) config.webhook = { ...root.webhook };
  return config;
}

/**
 * The children of an auto-sharding root, as KusionStack derives them: `<prefix>-0-canary` on the first
 * `canary.replicas` pods (limits: namespace In inNamespaces, hash In inShardHash), then `<prefix>-<i>-normal` on the
 * next `everyShardReplicas` pods each, owning a run of ceil(buckets/shardingSize) consecutive buckets minus the
 * canary's. A root without a canary (which crashes the original) simply has no canary child.
 */
export function expandRoot(root: ShardingConfigModel, settings: HashSettings): AutoShard[] {
  const spec = root.root;
  if (!spec || spec.disable || !spec.auto) return [];
  const { labels, bucketCount } = settings;
  const shards: AutoShard[] = [];
  const canary = spec.canary;
  const hasCanary = canary !== undefined && canary.replicas > 0 && (canary.inNamespaces.length > 0 || canary.inShardHash.length > 0);
  const canaryBuckets = hasCanary ? [...new Set(canary.inShardHash)].sort((a, b) => a - b) : [];
  const canaryHashValues = canaryBuckets.map(String);
  if (hasCanary) {
    const ordinals = range(0, canary.replicas);
    const extra: LabelSelectorRequirement[] = [];
    if (canary.inNamespaces.length > 0) extra.push({ key: labels.namespace, operator: 'In', values: [...canary.inNamespaces] });
    if (canaryHashValues.length > 0) extra.push({ key: labels.hash, operator: 'In', values: canaryHashValues });
    shards.push({
      role: 'canary',
      config: child(root, { name: `${spec.prefix}-0-canary`, ordinals, limits: spec.resourceSelector.map((l) => withRequirements(l, extra)) }),
      podOrdinals: ordinals,
      buckets: canaryBuckets,
    });
  }
  const firstPod = hasCanary ? canary.replicas : 0;
  const run = Math.ceil(bucketCount / spec.auto.shardingSize);
  for (let id = 1; id <= spec.auto.shardingSize; id++) {
    const buckets = range(run * (id - 1), run).filter((b) => b < bucketCount && !canaryBuckets.includes(b));
    const ordinals = range(firstPod + spec.auto.everyShardReplicas * (id - 1), spec.auto.everyShardReplicas);
    const extra: LabelSelectorRequirement[] = [];
    if (hasCanary && canary.inNamespaces.length > 0) extra.push({ key: labels.namespace, operator: 'NotIn', values: [...canary.inNamespaces] });
    if (canaryHashValues.length > 0) extra.push({ key: labels.hash, operator: 'NotIn', values: canaryHashValues });
    extra.push({ key: labels.hash, operator: 'In', values: buckets.map(String) });
    shards.push({
      role: 'normal',
      config: child(root, { name: `${spec.prefix}-${id}-normal`, ordinals, limits: spec.resourceSelector.map((l) => withRequirements(l, extra)) }),
      podOrdinals: ordinals,
      buckets,
    });
  }
  return shards;
}
