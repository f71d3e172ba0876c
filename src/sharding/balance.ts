import { HeaviestFirst } from './heaviest-first.js';
import { ShardHeap } from './shard-heap.js';
import { ShardLists } from './shard-lists.js';
import { workArray } from './work-arrays.js';

/** One balancing problem: units any of the shards may own (every shard reaches every unit here). */
export interface BalanceProblem {
  /** Units 0 .. unitCount-1; the arrays below may be longer (a caller's reused work arrays). */
  unitCount: number;
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

/**
 * Sticky bounded-load assignment. Units keep their previous owner unless that owner is above the bound; then the
 * shard sheds the cheapest set that brings it under (one unit just above the excess when there is one). Orphaned and
 * shed units go, heaviest first, to the least-loaded shard (which is never above the mean, so no shard ends above
 * mean + heaviest unit). Finally each joined shard takes units from the heaviest shard until it reaches the mean.
 *
 * A balancer keeps its work arrays between calls (grown to the largest problem so far): a long-lived planner's
 * changes then make no fleet-sized garbage, whose collection (a major GC of the fleet's heap) set their p95.
 */
export class Balancer {
  private owner = new Int32Array(0);
  private load = new Float64Array(0);
  private count = new Int32Array(0);
  private pool = new Int32Array(0);
  private exhausted = new Uint8Array(0);
  private readonly lists = new ShardLists();
  private readonly heap = new ShardHeap();
  private readonly sorter = new HeaviestFirst();

  /** The owner per unit: entries 0 .. unitCount-1 of an array the next call reuses. */
  balance(problem: BalanceProblem): Int32Array {
    const { unitCount, weights, shardCount: n, previous } = problem;
    const owner = (this.owner = workArray(this.owner, unitCount, Int32Array));
    owner.fill(-1, 0, unitCount);
    if (n === 0) return owner;
    const load = (this.load = workArray(this.load, n, Float64Array));
    load.fill(0, 0, n);
    const count = (this.count = workArray(this.count, n, Int32Array));
    count.fill(0, 0, n);
    // Orphaned and shed units: each unit enters at most once, so the pool never outgrows the units.
    const pool = (this.pool = workArray(this.pool, unitCount, Int32Array));
    let pooled = 0;
    let total = 0;
    let heaviest = 0;
    for (let u = 0; u < unitCount; u++) {
      const w = weights[u] as number;
      total += w;
      if (w > heaviest) heaviest = w;
      const p = previous[u] as number;
      if (p >= 0 && p < n) {
        owner[u] = p;
        load[p] = (load[p] as number) + w;
        count[p] = (count[p] as number) + 1;
      } else {
        pool[pooled++] = u;
      }
    }
    const mean = total / n;
    const cap = balanceBound(total, n, heaviest);

    const { lists } = this;
    lists.reset({ owner, weights, unitCount, shardCount: n });
    const give = (s: number, u: number): void => {
      owner[u] = s;
      load[s] = (load[s] as number) + (weights[u] as number);
      count[s] = (count[s] as number) + 1;
      lists.added(s, u);
    };
    const take = (s: number, position: number): number => {
      const u = lists.remove(s, position);
      load[s] = (load[s] as number) - (weights[u] as number);
      count[s] = (count[s] as number) - 1;
      owner[u] = -1;
      return u;
    };

    for (let s = 0; s < n; s++) {
      if ((load[s] as number) <= cap) continue;
      const list = lists.sorted(s);
      while ((load[s] as number) > cap) {
        const i = firstAtLeast(list, weights, (load[s] as number) - cap);
        pool[pooled++] = take(s, i < list.length ? i : list.length - 1);
      }
    }

    this.sorter.sort(pool, pooled, weights);
    const { heap } = this;
    heap.order(load, count, n);
    for (let i = 0; i < pooled; i++) {
      give(heap.top(), pool[i] as number);
      heap.updatedTop();
    }

    const exhausted = (this.exhausted = workArray(this.exhausted, n, Uint8Array));
    for (const s of problem.joined) {
      // A donor with no unit small enough stays so: the taker only gets heavier, so what it may take only shrinks.
      exhausted.fill(0, 0, n);
      exhausted[s] = 1;
      for (;;) {
        const deficit = mean - (load[s] as number);
        if (deficit <= 0) break;
        let donor = -1;
        for (let d = 0; d < n; d++) if (!exhausted[d] && (donor < 0 || (load[d] as number) > (load[donor] as number))) donor = d;
        if (donor < 0 || (load[donor] as number) <= (load[s] as number)) break;
        // Take no more than closes the gap, and never so much that the donor ends lighter than the taker. One scan
        // beats sorting: most donors are looked at once or twice.
        const i = lists.heaviestUpTo(donor, Math.min(deficit, ((load[donor] as number) - (load[s] as number)) / 2));
        if (i < 0) exhausted[donor] = 1;
        else give(s, take(donor, i));
      }
    }
    return owner;
  }
}

/** First index in a list sorted by weight whose weight is at least `min`. */
function firstAtLeast(list: readonly number[], weights: ArrayLike<number>, min: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((weights[list[mid] as number] as number) < min) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
