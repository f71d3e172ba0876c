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

/** First index in `units` (sorted by weight ascending) whose weight is at least `x` (or above it, if strict). */
function searchWeight(units: number[], weights: ArrayLike<number>, x: number, strict: boolean): number {
  let lo = 0;
  let hi = units.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    const w = weights[units[mid] as number] as number;
    if (w < x || (strict && w === x)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
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
  const pool: number[] = [];
  for (let u = 0; u < unitCount; u++) {
    const p = previous[u] as number;
    if (p >= 0 && p < n) {
      owner[u] = p;
      load[p] = (load[p] as number) + (weights[u] as number);
      count[p] = (count[p] as number) + 1;
    } else {
      pool.push(u);
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
  const sortUnits = (s: number): number[] => {
    let list = lists[s];
    if (!list) {
      grouped ??= group();
      list = [...grouped.units.subarray(grouped.offsets[s], grouped.offsets[s + 1]), ...(grouped.extra[s] as number[])];
      lists[s] = list;
      unsorted[s] = 1;
    }
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
  const take = (s: number, list: number[], index: number): number => {
    const [u] = list.splice(index, 1) as [number];
    load[s] = (load[s] as number) - (weights[u] as number);
    count[s] = (count[s] as number) - 1;
    owner[u] = -1;
    return u;
  };

  for (let s = 0; s < n; s++) {
    if ((load[s] as number) <= cap) continue;
    const list = sortUnits(s);
    while ((load[s] as number) > cap) {
      const i = searchWeight(list, weights, (load[s] as number) - cap, false);
      pool.push(take(s, list, i < list.length ? i : list.length - 1));
    }
  }

  pool.sort((a, b) => (weights[b] as number) - (weights[a] as number) || a - b);
  const heap = new ShardHeap(Array.from({ length: n }, (_, i) => i), load, count);
  for (const u of pool) {
    give(heap.top(), u);
    heap.updatedTop();
  }

  for (const s of problem.joined) fill(s);
  return owner;

  function fill(s: number): void {
    for (;;) {
      const deficit = mean - (load[s] as number);
      if (deficit <= 0) return;
      let donor = -1;
      for (let d = 0; d < n; d++) if (d !== s && (donor < 0 || (load[d] as number) > (load[donor] as number))) donor = d;
      if (donor < 0) return;
      // Take no more than closes the gap, and never so much that the donor ends lighter than the taker.
      const limit = Math.min(deficit, ((load[donor] as number) - (load[s] as number)) / 2);
      const list = sortUnits(donor);
      const i = searchWeight(list, weights, limit, true) - 1;
      if (i < 0) return;
      give(s, take(donor, list, i));
    }
  }
}
