import { validateManifest, type ShardingConfigModel, type ShardLimit } from '../api/index.js';
import {
  createHashSettings,
  expandRoot,
  operatorsFromConfigs,
  plan,
  shardName,
  type Assignment,
  type HashSettings,
  type OperatorInput,
} from '../sharding/index.js';
import type { ClusterReport } from '../transport/index.js';
import { parseUnitKey, unitKey, type UnitKey } from './handover.js';
import type { ClusterHealth } from './health.js';
import type { FleetPlan, OperatorPlan, ShardPlan } from './plan.js';

export interface DesiredInput {
  clusters: ReadonlyMap<string, { labels: Record<string, string> }>;
  reports: ReadonlyMap<string, ClusterReport>;
  health: ReadonlyMap<string, ClusterHealth>;
  /** What each operator's shards were meant to own last time (granted or in flight): keeps the plan sticky. */
  previous: ReadonlyMap<string, Record<string, UnitKey[]>>;
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
    for (const op of operatorsFromConfigs(models, { homeCluster: cluster, settings: clusterSettings })) {
      const merged = operators.get(op.name) ?? { name: op.name, multicluster: false, shards: [] };
      merged.multicluster = merged.multicluster || (op.multicluster ?? false);
      if (op.clusters && !merged.clusters) merged.clusters = op.clusters;
      merged.shards.push(...op.shards.map((s) => ({ ...s, name: shardName(cluster, s.name) })));
      operators.set(op.name, merged);
    }
    for (const model of models) {
      const children = model.root ? expandRoot(model, clusterSettings) : [];
      const leader = model.controller?.leaderElectionName;
      if (!model.root) extras.set(`${model.namespace}/${model.name}\u0000${shardName(cluster, model.name)}`, withLeader({ limits: model.limits }, leader));
      for (const child of children) {
        // A planned shard's buckets come from the planner, so only the root's resource limits apply to it.
        const planned = model.root?.clusters !== undefined && child.role === 'normal';
        extras.set(
          `${model.namespace}/${model.name}\u0000${shardName(cluster, child.config.name)}`,
          withLeader({ limits: planned ? (model.root?.resourceSelector ?? []) : child.config.limits }, leader),
        );
      }
    }
    const perNamespace = new Map<string, number>();
    for (const c of report.objectCounts) perNamespace.set(c.namespace, (perNamespace.get(c.namespace) ?? 0) + c.count);
    for (const [namespace, objects] of perNamespace) weights.push({ cluster, namespace, objects });
  }
  settings ??= createHashSettings();
  for (const name of operators.keys()) frozen.delete(name);

  const previous: Assignment = { operators: {} };
  for (const [operator, shards] of input.previous) {
    const byShard: Record<string, Record<string, number[]>> = {};
    for (const [shard, units] of Object.entries(shards)) {
      const clusters: Record<string, number[]> = {};
      for (const unit of units) {
        const { cluster, bucket } = parseUnitKey(unit);
        (clusters[cluster] ??= []).push(bucket);
      }
      byShard[shard] = clusters;
    }
    previous.operators[operator] = byShard;
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
      const units = Object.entries(clusters).flatMap(([cluster, buckets]) => {
        spanned.add(cluster);
        return buckets.map((b) => unitKey(cluster, b));
      });
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

function withLeader(extra: ShardExtras, leader: string | undefined): ShardExtras {
  return leader ? { ...extra, leaderElectionName: leader } : extra;
}
