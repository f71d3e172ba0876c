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
  /** Namespace name -> its number here; names repeat across clusters, so each is hashed once. */
  private readonly namespaces = new Map<string, number>();
  /** Bucket per namespace number. */
  private readonly namespaceBucket: number[] = [];
  /** Last reported object count per (namespace, cluster), keyed by namespace number x cluster count + cluster index. */
  private readonly objects: CountTable;

  constructor(input: PlanInput) {
    this.settings = createHashSettings({ algorithm: input.hash?.algorithm, bucketCount: input.hash?.bucketCount });
    this.clusters = sortedUnique(input.clusters, 'cluster');
    this.clusterIndex = new Map();
    const C = this.clusters.length;
    const offline = new Array<boolean>(C);
    for (let ci = 0; ci < C; ci++) {
      const c = this.clusters[ci] as ClusterInput;
      this.clusterIndex.set(c.name, ci);
      offline[ci] = c.health === 'Offline';
    }
    this.offline = offline;
    this.bucketCount = this.settings.bucketCount;
    this.weights = new Float64Array(C * this.bucketCount).fill(UNIT_BASE_WEIGHT);
    this.moveOffline = input.options?.moveUnitsOfOfflineClusters ?? false;
    // Entries for the same (cluster, namespace) add up first, then each total is added to its unit in the order
    // the totals were first listed: the same sums, in the same order, whatever the list's order.
    const objects = new CountTable(input.weights.length);
    this.objects = objects;
    for (const w of input.weights) {
      const ci = this.clusterIndex.get(w.cluster);
      if (ci !== undefined) objects.add(this.namespaceNumber(w.namespace) * C + ci, w.objects);
    }
    const { weights, namespaceBucket } = this;
    const B = this.bucketCount;
    for (let e = 0; e < objects.size; e++) {
      const key = objects.keyAt(e);
      const ci = key % C;
      const u = ci * B + (namespaceBucket[(key - ci) / C] as number);
      weights[u] = (weights[u] as number) + objects.valueAt(e);
    }
  }

  get unitCount(): number {
    return this.weights.length;
  }

  clusterOf(unit: number): string {
    return this.clusters[Math.floor(unit / this.bucketCount)]?.name as string;
  }

  private namespaceNumber(namespace: string): number {
    let n = this.namespaces.get(namespace);
    if (n === undefined) {
      n = this.namespaceBucket.length;
      this.namespaceBucket.push(bucketOf(namespace, this.settings));
      this.namespaces.set(namespace, n);
    }
    return n;
  }

  /** Records a namespace's object count; returns the unit whose weight changed, or -1 for an unknown cluster. */
  setObjects(cluster: string, namespace: string, objects: number): number {
    const ci = this.clusterIndex.get(cluster);
    if (ci === undefined) return -1;
    const n = this.namespaceNumber(namespace);
    const key = n * this.clusters.length + ci;
    const u = ci * this.bucketCount + (this.namespaceBucket[n] as number);
    this.weights[u] = (this.weights[u] as number) + objects - this.objects.set(key, objects);
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

/**
 * Numbers by whole-number key (below 2^53), entries kept in the order their keys first came: open addressing over
 * typed arrays, sized for the entries expected, so that filling it makes no garbage (a `Map` of the fleet's 20,000
 * namespaces made a fifth of a first plan's garbage).
 */
class CountTable {
  private keys: Float64Array;
  private values: Float64Array;
  /** Entry index + 1 per slot; 0 is empty. */
  private slots: Int32Array;
  size = 0;

  constructor(expected: number) {
    const capacity = Math.max(8, expected);
    this.keys = new Float64Array(capacity);
    this.values = new Float64Array(capacity);
    this.slots = new Int32Array(slotCount(capacity));
  }

  keyAt(entry: number): number {
    return this.keys[entry] as number;
  }

  valueAt(entry: number): number {
    return this.values[entry] as number;
  }

  /** Adds `amount` to the key's number (from 0 for a new key). */
  add(key: number, amount: number): void {
    const e = this.entry(key);
    this.values[e] = (this.values[e] as number) + amount;
  }

  /** Sets the key's number; returns the one it replaces (0 for a new key). */
  set(key: number, value: number): number {
    const e = this.entry(key);
    const old = this.values[e] as number;
    this.values[e] = value;
    return old;
  }

  /** The key's entry, added (at 0) when new. */
  private entry(key: number): number {
    let { slots } = this;
    let mask = slots.length - 1;
    let s = hashKey(key) & mask;
    for (let at = slots[s] as number; at !== 0; at = slots[s] as number) {
      if (this.keys[at - 1] === key) return at - 1;
      s = (s + 1) & mask;
    }
    if (this.size === this.keys.length) {
      this.grow();
      ({ slots } = this);
      mask = slots.length - 1;
      s = hashKey(key) & mask;
      while (slots[s] !== 0) s = (s + 1) & mask;
    }
    const e = this.size++;
    this.keys[e] = key;
    this.values[e] = 0;
    slots[s] = e + 1;
    return e;
  }

  private grow(): void {
    const capacity = this.keys.length * 2;
    const keys = new Float64Array(capacity);
    keys.set(this.keys);
    const values = new Float64Array(capacity);
    values.set(this.values);
    const slots = new Int32Array(slotCount(capacity));
    const mask = slots.length - 1;
    for (let e = 0; e < this.size; e++) {
      let s = hashKey(keys[e] as number) & mask;
      while (slots[s] !== 0) s = (s + 1) & mask;
      slots[s] = e + 1;
    }
    this.keys = keys;
    this.values = values;
    this.slots = slots;
  }
}

/** A power of two at least twice the capacity: the table stays at most half full. */
function slotCount(capacity: number): number {
  return 2 ** Math.ceil(Math.log2(capacity * 2));
}

/** Mixes both 32-bit halves of a whole number below 2^53. */
function hashKey(key: number): number {
  const h = Math.imul((key >>> 0) ^ Math.imul(Math.floor(key / 4294967296), 0x85ebca6b), 0x9e3779b1);
  return (h ^ (h >>> 15)) >>> 0;
}
