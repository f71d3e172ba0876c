import { ShardHeap } from './shard-heap.js';

/** One balancing problem: units any of the shards may own (every shard reaches every unit here). */
export interface BalanceProblem {
  /** Weight per unit (index = local unit number). */
  weights: ArrayLike<number>;
  shardCount: number;
  /** Previous owner per unit: a shard index, or -1. */
  previous: Int32Array;
  /** Shards that owned nothing before (joined since the previous plan): they take work from the heaviest. */
  joined: readonly number[];
}

/** How much above the mean a shard may carry before it must give units away. */
export const BALANCE_TOLERANCE = 1.05;

/** The balance bound: max(1.05 x mean, mean + heaviest unit). */
export function balanceBound(total: number, shardCount: number, heaviest: number): number {
  const mean = total / shardCount;
  return Math.max(BALANCE_TOLERANCE * mean, mean + heaviest);
}

const byWeightAsc = (w: ArrayLike<number>) => (a: number, b: number) => (w[a] as number) - (w[b] as number) || a - b;

const INDEX_BITS = 2 ** 21;

/** Below this many units a native sort beats counting (its table is as long as the heaviest weight). */
const COUNTING_MIN_UNITS = 256;

/**
 * Sorts the first `length` units by weight, heaviest first, ties by unit number. Whole weights (object counts) no
 * larger than a few times the number of units (a first plan's) are counted into place, in linear time; other whole
 * weights are packed with the unit number into one float and sorted natively; only fractional ones need a comparator.
 */
function sortHeaviestFirst(units: Int32Array, length: number, weights: ArrayLike<number>): void {
  let packable = length < INDEX_BITS;
  let ascending = true;
  let heaviest = 0;
  for (let i = 0; packable && i < length; i++) {
    const u = units[i] as number;
    const w = weights[u] as number;
    packable = Number.isInteger(w) && w >= 0 && w < 2 ** 31 && u < INDEX_BITS;
    if (w > heaviest) heaviest = w;
    if (i > 0 && u <= (units[i - 1] as number)) ascending = false;
  }
  if (!packable) {
    units.subarray(0, length).sort((a, b) => (weights[b] as number) - (weights[a] as number) || a - b);
    return;
  }
  if (length >= COUNTING_MIN_UNITS && heaviest <= 4 * length) {
    countHeaviestFirst(units, length, weights, heaviest, ascending);
    return;
  }
  const keys = new Float64Array(length);
  for (let i = 0; i < length; i++) {
    const u = units[i] as number;
    keys[i] = (weights[u] as number) * INDEX_BITS + (INDEX_BITS - 1 - u);
  }
  keys.sort();
  for (let i = 0; i < length; i++) {
    const key = keys[length - 1 - i] as number;
    units[i] = INDEX_BITS - 1 - (key % INDEX_BITS);
  }
}

/** Counting sort by whole weight, heaviest first; units of one weight keep ascending order (sorted first if need be). */
function countHeaviestFirst(units: Int32Array, length: number, weights: ArrayLike<number>, heaviest: number, ascending: boolean): void {
  const order = units.slice(0, length);
  if (!ascending) order.sort();
  // First index of each weight's run: the number of units heavier than it.
  const next = new Int32Array(heaviest + 1);
  for (let i = 0; i < length; i++) {
    const w = weights[order[i] as number] as number;
    next[w] = (next[w] as number) + 1;
  }
  for (let w = heaviest, at = 0; w >= 0; w--) {
    const c = next[w] as number;
    next[w] = at;
    at += c;
  }
  for (let i = 0; i < length; i++) {
    const u = order[i] as number;
    const w = weights[u] as number;
    const at = next[w] as number;
    units[at] = u;
    next[w] = at + 1;
  }
}

/**
 * Sticky bounded-load assignment. Units keep their previous owner unless that owner is above the bound; then the
 * shard sheds the cheapest set that brings it under (one unit just above the excess when there is one). Orphaned and
 * shed units go, heaviest first, to the least-loaded shard (which is never above the mean, so no shard ends above
 * mean + heaviest unit). Finally each joined shard takes units from the heaviest shard until it reaches the mean.
 * Returns the owner per unit.
 */
export function balance(problem: BalanceProblem): Int32Array {
  const { weights, shardCount: n, previous } = problem;
  const unitCount = weights.length;
  const owner = new Int32Array(unitCount).fill(-1);
  if (n === 0) return owner;
  let total = 0;
  let heaviest = 0;
  for (let u = 0; u < unitCount; u++) {
    const w = weights[u] as number;
    total += w;
    if (w > heaviest) heaviest = w;
  }
  const mean = total / n;
  const cap = balanceBound(total, n, heaviest);
  const load = new Float64Array(n);
  const count = new Int32Array(n);
  // Orphaned and shed units: each unit enters at most once, so the pool never outgrows the units.
  const pool = new Int32Array(unitCount);
  let pooled = 0;
  for (let u = 0; u < unitCount; u++) {
    const p = previous[u] as number;
    if (p >= 0 && p < n) {
      owner[u] = p;
      load[p] = (load[p] as number) + (weights[u] as number);
      count[p] = (count[p] as number) + 1;
    } else {
      pool[pooled++] = u;
    }
  }

  // Per-shard unit lists are needed only for the few shards that shed or donate: they are cut from one
  // counting-sort pass over the owners when first needed, then kept sorted by weight.
  const asc = byWeightAsc(weights);
  const lists: (number[] | undefined)[] = new Array<number[] | undefined>(n).fill(undefined);
  const unsorted = new Uint8Array(n);
  let grouped: { units: Int32Array; offsets: Int32Array; extra: number[][] } | undefined;
  const group = () => {
    const offsets = new Int32Array(n + 1);
    for (let u = 0; u < unitCount; u++) {
      const o = owner[u] as number;
      if (o >= 0) offsets[o + 1] = (offsets[o + 1] as number) + 1;
    }
    for (let s = 0; s < n; s++) offsets[s + 1] = (offsets[s + 1] as number) + (offsets[s] as number);
    const next = offsets.slice(0, n);
    const units = new Int32Array(offsets[n] as number);
    for (let u = 0; u < unitCount; u++) {
      const o = owner[u] as number;
      if (o < 0) continue;
      const at = next[o] as number;
      units[at] = u;
      next[o] = at + 1;
    }
    return { units, offsets, extra: Array.from({ length: n }, () => [] as number[]) };
  };
  const unitsOf = (s: number): number[] => {
    let list = lists[s];
    if (!list) {
      grouped ??= group();
      // A loop, not spread: spreading a typed array goes through its iterator.
      list = [];
      for (let i = grouped.offsets[s] as number, end = grouped.offsets[s + 1] as number; i < end; i++) list.push(grouped.units[i] as number);
      for (const u of grouped.extra[s] as number[]) list.push(u);
      lists[s] = list;
      unsorted[s] = 1;
    }
    return list;
  };
  const sortUnits = (s: number): number[] => {
    const list = unitsOf(s);
    if (unsorted[s]) {
      list.sort(asc);
      unsorted[s] = 0;
    }
    return list;
  };
  const give = (s: number, u: number): void => {
    owner[u] = s;
    load[s] = (load[s] as number) + (weights[u] as number);
    count[s] = (count[s] as number) + 1;
    if (!grouped) return;
    const list = lists[s];
    if (list) {
      list.push(u);
      unsorted[s] = 1;
    } else {
      (grouped.extra[s] as number[]).push(u);
    }
  };
  /** First index in the shard's sorted list whose weight is at least `min`. */
  const firstAtLeast = (list: number[], min: number): number => {
    let lo = 0;
    let hi = list.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((weights[list[mid] as number] as number) < min) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  /** Removes the unit at `index` of the shard's (materialised) list from the shard. */
  const take = (s: number, index: number): number => {
    const [u] = (lists[s] as number[]).splice(index, 1) as [number];
    load[s] = (load[s] as number) - (weights[u] as number);
    count[s] = (count[s] as number) - 1;
    owner[u] = -1;
    return u;
  };

  for (let s = 0; s < n; s++) {
    if ((load[s] as number) <= cap) continue;
    const list = sortUnits(s);
    while ((load[s] as number) > cap) {
      const i = firstAtLeast(list, (load[s] as number) - cap);
      pool[pooled++] = take(s, i < list.length ? i : list.length - 1);
    }
  }

  sortHeaviestFirst(pool, pooled, weights);
  const heap = new ShardHeap(load, count);
  for (let i = 0; i < pooled; i++) {
    give(heap.top(), pool[i] as number);
    heap.updatedTop();
  }

  for (const s of problem.joined) fill(s);
  return owner;

  function fill(s: number): void {
    // A donor with no unit small enough stays so: the taker only gets heavier, so what it may take only shrinks.
    const exhausted = new Uint8Array(n);
    exhausted[s] = 1;
    for (;;) {
      const deficit = mean - (load[s] as number);
      if (deficit <= 0) return;
      let donor = -1;
      for (let d = 0; d < n; d++) if (!exhausted[d] && (donor < 0 || (load[d] as number) > (load[donor] as number))) donor = d;
      if (donor < 0 || (load[donor] as number) <= (load[s] as number)) return;
      // Take no more than closes the gap, and never so much that the donor ends lighter than the taker.
      const limit = Math.min(deficit, ((load[donor] as number) - (load[s] as number)) / 2);
      // One scan beats sorting: most donors are looked at once or twice.
      const list = unitsOf(donor);
      let i = -1;
      for (let k = 0; k < list.length; k++) {
        const w = weights[list[k] as number] as number;
        if (w <= limit && (i < 0 || w > (weights[list[i] as number] as number))) i = k;
      }
      if (i < 0) exhausted[donor] = 1;
      else give(s, take(donor, i));
    }
  }
}
