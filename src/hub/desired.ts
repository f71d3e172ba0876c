import { validateManifest, type ShardingConfigModel, type ShardLimit } from '../api/index.js';
import {
  bucketsOfUnits,
  createHashSettings,
  operatorInput,
  plan,
  shardsOfConfigs,
  unitsOfBuckets,
  type Assignment,
  type HashSettings,
  type OperatorInput,
  type Ownership,
} from '../sharding/index.js';
import type { ClusterReport } from '../transport/index.js';
import type { ClusterHealth } from './health.js';
import type { FleetPlan, OperatorPlan, ShardPlan } from './plan.js';

export interface DesiredInput {
  clusters: ReadonlyMap<string, { labels: Record<string, string> }>;
  reports: ReadonlyMap<string, ClusterReport>;
  health: ReadonlyMap<string, ClusterHealth>;
  /** What each operator's shards were meant to own last time (granted or in flight): keeps the plan sticky. */
  previous: ReadonlyMap<string, Ownership>;
}

interface ShardExtras {
  leaderElectionName?: string;
  limits: ShardLimit[];
}

/**
 * The desired ownership of every operator, from the agents' reports (pure). Configs that fail validation freeze
 * their operator: its published route tables stay as they are until the config is fixed.
 */
export function desiredPlan(input: DesiredInput): FleetPlan {
  const operators = new Map<string, OperatorInput>();
  const extras = new Map<string, ShardExtras>();
  const frozen = new Set<string>();
  let settings: HashSettings | undefined;
  const weights: { cluster: string; namespace: string; objects: number }[] = [];

  for (const [cluster, report] of [...input.reports].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (!input.clusters.has(cluster)) continue;
    const clusterSettings = createHashSettings(report.hash);
    settings ??= clusterSettings;
    const models: ShardingConfigModel[] = [];
    for (const config of report.shardingConfigs) {
      const result = validateManifest(config.manifest, { bucketCount: clusterSettings.bucketCount });
      if (result.ok && result.model.kind === 'ShardingConfig') models.push(result.model);
      else frozen.add(`${config.namespace}/${config.name}`);
    }
    for (const meaning of shardsOfConfigs(models, { homeCluster: cluster, settings: clusterSettings })) {
      const op = operatorInput(meaning, (s) => s.name);
      const merged = operators.get(op.name) ?? { name: op.name, multicluster: false, shards: [] };
      merged.multicluster = merged.multicluster || (op.multicluster ?? false);
      if (op.clusters && !merged.clusters) merged.clusters = op.clusters;
      merged.shards.push(...op.shards);
      operators.set(op.name, merged);
      for (const shard of meaning.shards) extras.set(`${meaning.operator}\u0000${shard.name}`, shard);
    }
    const perNamespace = new Map<string, number>();
    for (const c of report.objectCounts) perNamespace.set(c.namespace, (perNamespace.get(c.namespace) ?? 0) + c.count);
    for (const [namespace, objects] of perNamespace) weights.push({ cluster, namespace, objects });
  }
  settings ??= createHashSettings();
  for (const name of operators.keys()) frozen.delete(name);

  const previous: Assignment = { operators: {} };
  for (const [operator, shards] of input.previous) {
    previous.operators[operator] = Object.fromEntries(Object.entries(shards).map(([shard, units]) => [shard, Object.fromEntries(bucketsOfUnits(units))]));
  }
  const result = plan(
    {
      hash: { algorithm: settings.algorithm, bucketCount: settings.bucketCount },
      clusters: [...input.clusters].map(([name, c]) => ({ name, labels: c.labels, health: input.health.get(name) ?? 'Unknown' })),
      weights,
      operators: [...operators.values()],
    },
    previous,
  );

  const planned: OperatorPlan[] = [];
  for (const [operator, shards] of Object.entries(result.assignment.operators)) {
    const input = operators.get(operator);
    const spanned = new Set<string>(input?.shards.map((s) => s.homeCluster) ?? []);
    const shardPlans: ShardPlan[] = Object.entries(shards).map(([name, clusters]) => {
      const home = input?.shards.find((s) => s.name === name)?.homeCluster ?? '';
      const extra = extras.get(`${operator}\u0000${name}`);
      for (const cluster of Object.keys(clusters)) spanned.add(cluster);
      const units = unitsOfBuckets(Object.entries(clusters));
      return {
        name,
        homeCluster: home,
        ...(extra?.leaderElectionName ? { leaderElectionName: extra.leaderElectionName } : {}),
        limits: (extra?.limits ?? []).map((l) => ({ relateResources: l.relateResources, selector: l.selector })),
        units,
      };
    });
    planned.push({
      operator,
      hashAlgorithm: settings.algorithm,
      bucketCount: settings.bucketCount,
      labels: { ...settings.labels },
      clusters: [...spanned].sort(),
      shards: shardPlans,
    });
  }
  return { operators: planned, frozen: [...frozen] };
}
