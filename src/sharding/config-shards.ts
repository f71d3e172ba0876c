import type { LabelSelector, ObjectLabels, ResourceGroup, ShardingConfigModel, ShardLimit } from '../api/index.js';
import { expandRoot } from './auto-sharding.js';
import { bucketOf, type HashSettings } from './hash.js';
import { compileSelector } from './selector.js';
import { shardName } from './shard-name.js';

/** Where a ShardingConfig is read: the cluster it is applied in, and that cluster's hash settings. */
export interface ConfigHome {
  homeCluster: string;
  settings: HashSettings;
}

/** One shard a ShardingConfig defines in its home cluster. */
export interface ConfigShard {
  /** The ShardingConfig the shard runs as: a hand-written config itself, or a root's child (`<prefix>-0-canary`, `<prefix>-<i>-normal`). */
  config: string;
  /** `<cluster>/<config>` (`shardName`): the shard in plans, route tables, NATS identities and the proxy's `--shard`. */
  name: string;
  /** The buckets it owns by hash in its home cluster, or `planned`: a spanning root's normal shard, placed by the planner. */
  buckets: number[] | 'planned';
  /** What its proxy enforces besides its units: the root's resourceSelector for a planned shard, the (child's) limits otherwise. */
  limits: ShardLimit[];
  /** The operator's leader-election lock (the proxy renames it per shard); absent when the config names none. */
  leaderElectionName?: string;
  /** The ordinals of the root's targetStatefulSet pods that run the shard; absent for a hand-written config. */
  podOrdinals?: number[];
}

/** What one validated ShardingConfig means in its home cluster: the operator it belongs to and the shards it defines. */
export interface ConfigShards {
  /** `<namespace>/<name>`: the same config applied in several clusters is one operator. */
  operator: string;
  /** The cluster the config is applied in, where its shards' pods run. */
  homeCluster: string;
  /** `spec.controller.multicluster`: the operator handles objects of other clusters too. */
  multicluster: boolean;
  /** The clusters a root spans (`spec.root.clusters`); absent: its home cluster only. */
  clusters?: LabelSelector;
  /** A root's targetStatefulSet, whose pods run its shards by ordinal; absent for a hand-written config. */
  targetStatefulSet?: string;
  /** A hand-written config's one shard, or a root's children (none when the root is disabled or not auto). */
  shards: ConfigShard[];
  /** `spec.webhook`: where every shard's operator serves its admission webhook (the proxy routes each review to the owner). */
  webhook?: { certDir: string; port: number };
  /** `spec.objectLabels`: whether its objects are selected by label where the API server could filter itself (`objectSelection`). */
  objectLabels: ObjectLabels;
  /** `spec.objectSharding`: resources whose objects belong to the bucket of their uid. */
  objectSharding: ResourceGroup[];
  /** `spec.unshardedWrites`: resources of no bucket the shards may write. */
  unshardedWrites: ResourceGroup[];
}

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
 * What a validated ShardingConfig means in its home cluster (pure): the one reading the hub's planner (and so the
 * route tables) and the agent's sidecar injector share. A hand-written config is one shard owning the buckets its
 * limits name. A root is its children as KusionStack expands them (`expandRoot`), each on its pods by ordinal; with
 * `spec.root.clusters` its normal shards are planned across the matching clusters under the root's resourceSelector
 * (its canary keeps its buckets), without it each keeps its run of buckets.
 */
export function shardsOfConfig(config: ShardingConfigModel, home: ConfigHome): ConfigShards {
  const { homeCluster, settings } = home;
  const leader = config.controller?.leaderElectionName;
  const shard = (name: string, of: Pick<ConfigShard, 'buckets' | 'limits' | 'podOrdinals'>): ConfigShard => ({
    config: name,
    name: shardName(homeCluster, name),
    ...of,
    ...(leader ? { leaderElectionName: leader } : {}),
  });
  const meaning: ConfigShards = {
    operator: `${config.namespace}/${config.name}`,
    homeCluster,
    multicluster: config.controller?.multicluster ?? false,
    shards: [],
    objectLabels: config.objectLabels,
    objectSharding: config.objectSharding,
    unshardedWrites: config.unshardedWrites,
  };
  if (config.webhook) meaning.webhook = { ...config.webhook };
  const root = config.root;
  if (!root) {
    meaning.shards.push(shard(config.name, { buckets: bucketsOfLimits(config.limits, settings), limits: config.limits }));
    return meaning;
  }
  meaning.targetStatefulSet = root.targetStatefulSet;
  if (root.clusters) meaning.clusters = root.clusters;
  for (const child of expandRoot(config, settings)) {
    const planned = root.clusters !== undefined && child.role === 'normal';
    meaning.shards.push(
      shard(child.config.name, {
        buckets: planned ? 'planned' : child.buckets,
        limits: planned ? root.resourceSelector : child.config.limits,
        podOrdinals: child.podOrdinals,
      }),
    );
  }
  return meaning;
}

/** `name-3` of StatefulSet `name` is ordinal 3; other names have none. */
function ordinal(pod: string, statefulSet: string): number | undefined {
  const match = pod.startsWith(`${statefulSet}-`) ? /^\d+$/.exec(pod.slice(statefulSet.length + 1)) : null;
  return match ? Number(match[0]) : undefined;
}

/**
 * The shard a pod runs of a config (pure): a hand-written config's one shard, or a root's child by the pod's
 * StatefulSet ordinal. The sidecar injector (its proxy's `--shard`) and the agent's report (where the hub finds
 * each shard's pods) both read it here.
 */
export function shardOfPod(meaning: ConfigShards, pod: string): ConfigShard | undefined {
  if (meaning.targetStatefulSet === undefined) return meaning.shards[0];
  const at = ordinal(pod, meaning.targetStatefulSet);
  return at === undefined ? undefined : meaning.shards.find((s) => s.podOrdinals?.includes(at));
}

/**
 * What the ShardingConfigs of one cluster mean: the roots', then the hand-written configs'. A config a root
 * generated is skipped when listed, since the root stands for it.
 */
export function shardsOfConfigs(configs: readonly ShardingConfigModel[], home: ConfigHome): ConfigShards[] {
  const meanings: ConfigShards[] = [];
  const generated = new Set<string>();
  for (const config of configs) {
    if (!config.root) continue;
    const root = shardsOfConfig(config, home);
    for (const shard of root.shards) generated.add(`${config.namespace}/${shard.config}`);
    meanings.push(root);
  }
  for (const config of configs) {
    if (!config.root && !generated.has(`${config.namespace}/${config.name}`)) meanings.push(shardsOfConfig(config, home));
  }
  return meanings;
}
