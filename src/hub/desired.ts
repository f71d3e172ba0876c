import { InvalidConfigError } from '../errors.js';
import { validateManifest, type ObjectLabels, type ResourceGroup, type ShardingConfigModel, type ShardLimit } from '../api/index.js';
import {
  bucketsOfUnits,
  createHashSettings,
  homeClusterOf,
  operatorInput,
  plan,
  shardsOfConfigs,
  unitsOfBuckets,
  type Assignment,
  type HashSettings,
  type OperatorInput,
  type PlanInput,
  type Ownership,
} from '../sharding/index.js';
import type { ClusterReport, TableRule } from '../transport/index.js';
import { sameHashSettings } from './report-check.js';
import type { ClusterHealth } from './health.js';
import type { OperatorClusters } from './options.js';
import type { FleetPlan, OperatorPlan, ShardPlan } from './plan.js';

export interface DesiredInput {
  /** The fleet's hash settings, where the hub was given them: a stored report that labels otherwise freezes the plan. */
  hash?: HashSettings;
  clusters: ReadonlyMap<string, { labels: Record<string, string> }>;
  /** The hub's --operator-file, where given: the only operators planned, and the clusters each may come from. */
  operators?: OperatorClusters | undefined;
  reports: ReadonlyMap<string, ClusterReport>;
  health: ReadonlyMap<string, ClusterHealth>;
  /** The clusters this hub has heard a heartbeat from since it started. */
  heard?: ReadonlySet<string>;
  /** Whether shards homed in an Offline cluster give up their units (the hub's --move-units-of-offline-clusters). */
  moveUnitsOfOfflineClusters?: boolean;
  /** What each operator's shards were meant to own last time (granted or in flight): keeps the plan sticky. */
  previous: ReadonlyMap<string, Ownership>;
}

interface ShardExtras {
  leaderElectionName?: string;
  limits: ShardLimit[];
}

/** The ready pods' IPs of each shard, as the agents report them (pods of no shard or without an IP left out). */
function shardEndpoints(reports: Iterable<ClusterReport>): Map<string, string[]> {
  const endpoints = new Map<string, string[]>();
  for (const report of reports) {
    for (const pod of report.pods) {
      if (!pod.ready || pod.shard === undefined || pod.ip === undefined) continue;
      endpoints.set(pod.shard, [...(endpoints.get(pod.shard) ?? []), pod.ip]);
    }
  }
  return endpoints;
}

/**
 * Plans every operator at once; when that throws (one operator's shards cannot be placed under the fleet's hash
 * settings, say), plans each alone and freezes the ones that throw, so that one operator's failure stops no other's.
 */
function planIsolated(input: Omit<PlanInput, 'operators'>, operators: OperatorInput[], previous: Assignment, frozen: Set<string>): Assignment {
  try {
    return plan({ ...input, operators }, previous).assignment;
  } catch (err) {
    if (!(err instanceof InvalidConfigError)) throw err;
    const assignment: Assignment = { operators: {} };
    for (const operator of operators) {
      try {
        Object.assign(assignment.operators, plan({ ...input, operators: [operator] }, previous).assignment.operators);
      } catch (alone) {
        if (!(alone instanceof InvalidConfigError)) throw alone;
        frozen.add(operator.name);
      }
    }
    return assignment;
  }
}

/**
 * The desired ownership of every operator, from the agents' reports (pure). Configs that fail validation freeze
 * their operator: its published route tables stay as they are until the config is fixed.
 */
export function desiredPlan(input: DesiredInput): FleetPlan {
  const operators = new Map<string, OperatorInput>();
  const extras = new Map<string, ShardExtras>();
  /** The webhook port of each operator whose config has `spec.webhook` (the first cluster's, by name). */
  const webhooks = new Map<string, number>();
  /**
   * The `spec.objectLabels` of each operator, the first cluster's by name like the webhook port: one operator's
   * configs are meant to be the same manifest in every cluster.
   */
  const objectLabels = new Map<string, ObjectLabels>();
  const objectSharding = new Map<string, ResourceGroup[]>();
  const unshardedWrites = new Map<string, ResourceGroup[]>();
  const frozen = new Set<string>();
  const weights: { cluster: string; namespace: string; objects: number }[] = [];
  /** The valid rules of each cluster by namespace, validated once per plan. */
  const rules = new Map<string, Map<string, TableRule[]>>();

  /** Each listed operator's clusters, where the hub has an operator file. */
  const admitted = input.operators === undefined ? undefined : new Map(input.operators.map((o) => [o.operator, new Set(o.clusters)]));
  const notAdmitted: { operator: string; cluster: string }[] = [];
  /** Clusters whose stored report labels by other hash settings than the hub's. */
  const outOfStep = new Set<string>();
  let settings: HashSettings | undefined = input.hash;
  for (const [cluster, report] of [...input.reports].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (!input.clusters.has(cluster)) continue;
    const clusterSettings = createHashSettings(report.hash);
    if (input.hash !== undefined && !sameHashSettings(clusterSettings, input.hash)) {
      outOfStep.add(cluster);
      continue;
    }
    settings ??= clusterSettings;
    rules.set(cluster, validRules(report));
    const models: ShardingConfigModel[] = [];
    for (const config of report.shardingConfigs) {
      const result = validateManifest(config.manifest, { bucketCount: clusterSettings.bucketCount });
      const model = result.ok && result.model.kind === 'ShardingConfig' ? result.model : undefined;
      // The operator a config belongs to is the one its manifest names (reports listing it otherwise are dropped).
      const operator = model === undefined ? `${config.namespace}/${config.name}` : `${model.namespace}/${model.name}`;
      if (admitted !== undefined && admitted.get(operator)?.has(cluster) !== true) {
        // Not the operator file's to plan: naming an operator is not joining it (test/unit/hub/rogue-report.test.ts,
        // 'changes nothing of it with the hub's --operator-file: the plan is the one prod's report alone makes').
        notAdmitted.push({ operator, cluster });
        continue;
      }
      if (model === undefined) frozen.add(operator);
      else models.push(model);
    }
    let meanings: ReturnType<typeof shardsOfConfigs>;
    try {
      meanings = shardsOfConfigs(models, { homeCluster: cluster, settings: clusterSettings });
    } catch (err) {
      if (!(err instanceof InvalidConfigError)) throw err;
      // One cluster's configs that cannot be read together (two claiming one shard name, say) freeze its own
      // operators, never every other cluster's pass (test/unit/hub/rogue-report.test.ts, 'two configs that claim one
      // shard: only its own operators freeze, prod is planned').
      for (const model of models) frozen.add(`${model.namespace}/${model.name}`);
      meanings = [];
    }
    for (const meaning of meanings) {
      const op = operatorInput(meaning, (s) => s.name);
      const within = admitted?.get(op.name);
      const merged = operators.get(op.name) ?? { name: op.name, multicluster: false, shards: [], ...(within === undefined ? {} : { within: [...within] }) };
      merged.multicluster = merged.multicluster || (op.multicluster ?? false);
      if (op.clusters && !merged.clusters) merged.clusters = op.clusters;
      merged.shards.push(...op.shards);
      operators.set(op.name, merged);
      if (meaning.webhook && !webhooks.has(op.name)) webhooks.set(op.name, meaning.webhook.port);
      if (!objectLabels.has(op.name)) objectLabels.set(op.name, meaning.objectLabels);
      if (!objectSharding.has(op.name)) objectSharding.set(op.name, meaning.objectSharding);
      if (!unshardedWrites.has(op.name)) unshardedWrites.set(op.name, meaning.unshardedWrites);
      for (const shard of meaning.shards) extras.set(`${meaning.operator}\u0000${shard.name}`, shard);
    }
    const perNamespace = new Map<string, number>();
    for (const c of report.objectCounts) perNamespace.set(c.namespace, (perNamespace.get(c.namespace) ?? 0) + c.count);
    for (const [namespace, objects] of perNamespace) weights.push({ cluster, namespace, objects });
  }
  settings ??= createHashSettings();
  for (const name of operators.keys()) frozen.delete(name);
  // An operator with none of its configs admitted keeps what it was granted while a cluster that ran one of its shards
  // still configures it: a line left out of the operator file, or a cluster misnamed in it, must not fence running
  // shards. Any other cluster's copy counts for nothing, so it cannot pin a decommissioned operator's tables
  // (test/unit/hub/rogue-report.test.ts, "a copy cannot pin a decommissioned operator's tables: only the clusters its
  // shards ran in keep it frozen"); once none of those clusters configures it, it is withdrawn as ever.
  for (const { operator, cluster } of notAdmitted) {
    const granted = input.previous.get(operator);
    if (granted !== undefined && !operators.has(operator) && Object.keys(granted).some((shard) => homeClusterOf(shard) === cluster)) frozen.add(operator);
  }
  const refused = notAdmitted.length > 0 ? { notAdmitted } : {};
  if (outOfStep.size > 0) {
    // A stored report that hashes otherwise than the hub (its agent or the hub's --hash-algorithm changed since it
    // was stored: new ones are dropped on arrival) cannot be planned with, and leaving its cluster out would revoke
    // its units. Every operator keeps its published tables until the settings agree again; the hub logs the freeze.
    return { operators: [], frozen: [...new Set([...input.previous.keys(), ...operators.keys(), ...frozen])], outOfStep: [...outOfStep], ...refused };
  }

  const previous: Assignment = { operators: {} };
  for (const [operator, shards] of input.previous) {
    previous.operators[operator] = Object.fromEntries(Object.entries(shards).map(([shard, units]) => [shard, Object.fromEntries(bucketsOfUnits(units))]));
  }
  const owning = input.moveUnitsOfOfflineClusters === true ? clustersOwningUnits(input.previous) : new Set<string>();
  const planInput = {
    hash: { algorithm: settings.algorithm, bucketCount: settings.bucketCount },
    clusters: [...input.clusters].map(([name, c]) => ({ name, labels: c.labels, health: planningHealth(name, input, owning) })),
    weights,
    ...(input.moveUnitsOfOfflineClusters === true ? { options: { moveUnitsOfOfflineClusters: true } } : {}),
  };
  const assignment = planIsolated(planInput, [...operators.values()], previous, frozen);

  const filtering = new Set([...input.reports].filter(([name, report]) => input.clusters.has(name) && report.shardSelectors === true).map(([name]) => name));
  const endpoints = webhooks.size > 0 ? shardEndpoints(input.reports.values()) : new Map<string, string[]>();
  const planned: OperatorPlan[] = [];
  for (const [operator, shards] of Object.entries(assignment.operators)) {
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
        rules: rules.get(home)?.get(operator.slice(0, operator.indexOf('/'))) ?? [],
      };
    });
    const webhookPort = webhooks.get(operator);
    const clusters = [...spanned].sort();
    const shardSelectorClusters = clusters.filter((name) => filtering.has(name));
    planned.push({
      operator,
      hashAlgorithm: settings.algorithm,
      bucketCount: settings.bucketCount,
      labels: { ...settings.labels },
      clusters,
      shards: shardPlans,
      objectLabels: objectLabels.get(operator) ?? 'Auto',
      ...(objectSharding.get(operator)?.length ? { objectSharding: objectSharding.get(operator) } : {}),
      ...(unshardedWrites.get(operator)?.length ? { unshardedWrites: unshardedWrites.get(operator) } : {}),
      // Only when there are some, so plans (and tables) of clusters without shard selectors stay as they were.
      ...(shardSelectorClusters.length ? { shardSelectorClusters } : {}),
      ...(webhookPort === undefined
        ? {}
        : { webhook: { port: webhookPort, endpoints: Object.fromEntries(shardPlans.map((s) => [s.name, [...(endpoints.get(s.name) ?? [])].sort()])) } }),
    });
  }
  return { operators: planned, frozen: [...frozen], ...refused };
}

/**
 * A cluster's health as the planner takes it. With moveUnitsOfOfflineClusters, a cluster this hub has not heard from
 * yet, none of whose shards owns anything, counts as Offline: a hub started while a failed-over cluster is down sees
 * it Unknown until --offline-after, and would meanwhile give its shards units back (test/unit/hub/desired-offline.test.ts,
 * 'gives a shard no units back while its cluster has not been heard from'). A
 * shard gains units only once its cluster has been heard from; one that owns units keeps them until it is Offline.
 */
function planningHealth(cluster: string, input: DesiredInput, owning: ReadonlySet<string>): ClusterHealth {
  const health = input.health.get(cluster) ?? 'Unknown';
  if (health !== 'Unknown' || input.moveUnitsOfOfflineClusters !== true || input.heard?.has(cluster) !== false) return health;
  return owning.has(cluster) ? health : 'Offline';
}

/** The clusters where a shard owns units in `previous`, read once per plan. */
function clustersOwningUnits(previous: ReadonlyMap<string, Ownership>): Set<string> {
  const owning = new Set<string>();
  for (const shards of previous.values()) {
    for (const [shard, units] of Object.entries(shards)) if (units.length > 0) owning.add(homeClusterOf(shard));
  }
  return owning;
}

/**
 * The CircuitBreakers and FaultInjections a cluster reported whose manifests validate, by namespace, each sorted by
 * kind then name. An invalid one is left out: its agent says why in its status, and no proxy sees it.
 */
function validRules(report: ClusterReport): Map<string, TableRule[]> {
  const byNamespace = new Map<string, TableRule[]>();
  for (const object of [...report.circuitBreakers, ...report.faultInjections]) {
    const result = validateManifest(object.manifest);
    if (!result.ok || (result.model.kind !== 'CircuitBreaker' && result.model.kind !== 'FaultInjection')) continue;
    // Named as the manifest names itself: that is what the proxy validates and applies.
    const { kind, namespace, name, spec } = result.model;
    const rule: TableRule = { kind, namespace, name, generation: object.generation, ...(spec.selector ? { selector: spec.selector } : {}), manifest: object.manifest };
    byNamespace.set(namespace, [...(byNamespace.get(namespace) ?? []), rule]);
  }
  for (const list of byNamespace.values()) list.sort((a, b) => (a.kind === b.kind ? (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) : a.kind < b.kind ? -1 : 1));
  return byNamespace;
}
