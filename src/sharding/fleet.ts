import { InvalidConfigError } from '../errors.js';
import { bucketOf, createHashSettings, type HashSettings } from './hash.js';
import type { ClusterHealth, ClusterInput, PlanInput } from './plan-format.js';

/**
 * Every unit costs one on top of its objects (a watch and its bookkeeping), so clusters that report no objects yet
 * are still spread by unit count rather than piled on one shard.
 */
export const UNIT_BASE_WEIGHT = 1;

const byName = (a: { name: string }, b: { name: string }): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

/** Items sorted by name (so input order never matters); a repeated name is an error. */
export function sortedUnique<T extends { name: string }>(items: readonly T[], what: string): T[] {
  const sorted = [...items].sort(byName);
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i]?.name === sorted[i - 1]?.name) throw new InvalidConfigError(`${what} "${sorted[i]?.name}" is listed twice`);
  }
  return sorted;
}

/**
 * The planner's view of the fleet (the hub's KV-backed view is `Fleet` in src/hub): the facts every operator's plan
 * shares, clusters in name order and the weight of each unit (index = cluster index x bucket count + bucket), kept
 * up to date as object counts change.
 */
export class PlanningFleet {
  readonly settings: HashSettings;
  readonly clusters: ClusterInput[];
  readonly clusterIndex: Map<string, number>;
  readonly bucketCount: number;
  readonly weights: Float64Array;
  readonly offline: boolean[];
  readonly moveOffline: boolean;
  /** Last reported object count per namespace, per cluster index. */
  private readonly objects: Map<string, number>[];
  private readonly buckets = new Map<string, number>();

  constructor(input: PlanInput) {
    this.settings = createHashSettings({ algorithm: input.hash?.algorithm, bucketCount: input.hash?.bucketCount });
    this.clusters = sortedUnique(input.clusters, 'cluster');
    this.clusterIndex = new Map(this.clusters.map((c, i) => [c.name, i]));
    this.bucketCount = this.settings.bucketCount;
    this.weights = new Float64Array(this.clusters.length * this.bucketCount).fill(UNIT_BASE_WEIGHT);
    this.offline = this.clusters.map((c) => c.health === 'Offline');
    this.moveOffline = input.options?.moveUnitsOfOfflineClusters ?? false;
    this.objects = this.clusters.map(() => new Map());
    // Entries for the same (cluster, namespace) add up, so the order of the list never changes the plan.
    const totals = new Map<string, { cluster: string; namespace: string; objects: number }>();
    for (const w of input.weights) {
      const key = `${w.cluster}\u0000${w.namespace}`;
      const total = totals.get(key);
      if (total) total.objects += w.objects;
      else totals.set(key, { ...w });
    }
    for (const w of totals.values()) this.setObjects(w.cluster, w.namespace, w.objects);
  }

  get unitCount(): number {
    return this.weights.length;
  }

  clusterOf(unit: number): string {
    return this.clusters[Math.floor(unit / this.bucketCount)]?.name as string;
  }

  /** Records a namespace's object count; returns the unit whose weight changed, or -1 for an unknown cluster. */
  setObjects(cluster: string, namespace: string, objects: number): number {
    const ci = this.clusterIndex.get(cluster);
    if (ci === undefined) return -1;
    let b = this.buckets.get(namespace);
    if (b === undefined) {
      b = bucketOf(namespace, this.settings);
      this.buckets.set(namespace, b);
    }
    const counts = this.objects[ci] as Map<string, number>;
    const u = ci * this.bucketCount + b;
    this.weights[u] = (this.weights[u] as number) + objects - (counts.get(namespace) ?? 0);
    counts.set(namespace, objects);
    return u;
  }

  /** Returns the cluster's index when its Offline-ness changed, else -1. */
  setHealth(cluster: string, health: ClusterHealth): number {
    const ci = this.clusterIndex.get(cluster);
    if (ci === undefined) return -1;
    const offline = health === 'Offline';
    if (this.offline[ci] === offline) return -1;
    this.offline[ci] = offline;
    return ci;
  }
}
