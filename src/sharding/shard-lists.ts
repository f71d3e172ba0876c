import { workArray } from './work-arrays.js';

const NONE: readonly number[] = [];

/**
 * Each shard's units during one balance, for the few shards that shed or donate. A shard's list is in the order
 * the balance has always read it, which decides its ties: its units by number when first needed (one counting-sort
 * pass over the owners), then those given to it since; sorted by weight when it sheds. A shard that is only read
 * (most donors give nothing) is read in place, and a unit taken from there is marked dead rather than the list
 * copied out, so a change allocates next to nothing. The work arrays are kept for the next balance.
 */
export class ShardLists {
  private owner: Int32Array = new Int32Array(0);
  private weights: ArrayLike<number> = [];
  private unitCount = 0;
  private shardCount = 0;
  private grouped = false;
  /** Units grouped by the owner they had when grouped: shard s's are units[offsets[s] .. offsets[s + 1]). */
  private units = new Int32Array(0);
  private offsets = new Int32Array(0);
  private cursor = new Int32Array(0);
  /** Grouped units taken from their shard since (by position in `units`). */
  private dead = new Uint8Array(0);
  /** Units given to each shard since it was grouped, while it has no list of its own. */
  private given: (number[] | undefined)[] = [];
  /** Shards' lists once copied out (to sort them); `unsorted` marks those changed since sorted. */
  private lists: (number[] | undefined)[] = [];
  private unsorted = new Uint8Array(0);
  private readonly byWeightAsc = (a: number, b: number): number => (this.weights[a] as number) - (this.weights[b] as number) || a - b;

  /** Starts a balance: shard s owns the units whose `owner` is s (read when a list is first needed; lists before are dropped then). */
  reset(problem: { owner: Int32Array; weights: ArrayLike<number>; unitCount: number; shardCount: number }): void {
    this.owner = problem.owner;
    this.weights = problem.weights;
    this.unitCount = problem.unitCount;
    this.shardCount = problem.shardCount;
    this.grouped = false;
  }

  /** Records that shard s was given unit u (its owner already says so). */
  added(s: number, u: number): void {
    if (!this.grouped) return;
    const list = this.lists[s];
    if (list) {
      list.push(u);
      this.unsorted[s] = 1;
    } else {
      (this.given[s] ??= []).push(u);
    }
  }

  /** Shard s's units, lightest first (ties by unit number). */
  sorted(s: number): number[] {
    const list = this.listed(s);
    if (this.unsorted[s]) {
      list.sort(this.byWeightAsc);
      this.unsorted[s] = 0;
    }
    return list;
  }

  /** Where in shard s's list its heaviest unit of at most `limit` is (the first of equals); -1 for none. */
  heaviestUpTo(s: number, limit: number): number {
    this.group();
    const { weights } = this;
    let best = -1;
    let bestWeight = 0;
    const list = this.lists[s];
    if (list) {
      for (let k = 0; k < list.length; k++) {
        const w = weights[list[k] as number] as number;
        if (w <= limit && (best < 0 || w > bestWeight)) {
          best = k;
          bestWeight = w;
        }
      }
      return best;
    }
    const { units, dead } = this;
    const start = this.offsets[s] as number;
    const grouping = (this.offsets[s + 1] as number) - start;
    const given = this.given[s] ?? NONE;
    for (let k = 0; k < grouping + given.length; k++) {
      if (k < grouping && dead[start + k]) continue;
      const w = weights[(k < grouping ? units[start + k] : given[k - grouping]) as number] as number;
      if (w <= limit && (best < 0 || w > bestWeight)) {
        best = k;
        bestWeight = w;
      }
    }
    return best;
  }

  /** Removes and returns the unit at `position` of shard s's list (as `sorted` or `heaviestUpTo` told it). */
  remove(s: number, position: number): number {
    this.group();
    const list = this.lists[s];
    if (list) return list.splice(position, 1)[0] as number;
    const start = this.offsets[s] as number;
    const grouping = (this.offsets[s + 1] as number) - start;
    if (position >= grouping) return (this.given[s] as number[]).splice(position - grouping, 1)[0] as number;
    this.dead[start + position] = 1;
    return this.units[start + position] as number;
  }

  private listed(s: number): number[] {
    this.group();
    let list = this.lists[s];
    if (list) return list;
    list = [];
    for (let i = this.offsets[s] as number, end = this.offsets[s + 1] as number; i < end; i++) {
      if (!this.dead[i]) list.push(this.units[i] as number);
    }
    const given = this.given[s];
    if (given) for (const u of given) list.push(u);
    this.lists[s] = list;
    this.unsorted[s] = 1;
    return list;
  }

  private group(): void {
    if (this.grouped) return;
    this.grouped = true;
    const { owner, unitCount, shardCount: n } = this;
    const offsets = (this.offsets = workArray(this.offsets, n + 1, Int32Array));
    offsets.fill(0, 0, n + 1);
    for (let u = 0; u < unitCount; u++) {
      const o = owner[u] as number;
      if (o >= 0) offsets[o + 1] = (offsets[o + 1] as number) + 1;
    }
    for (let s = 0; s < n; s++) offsets[s + 1] = (offsets[s + 1] as number) + (offsets[s] as number);
    const next = (this.cursor = workArray(this.cursor, n, Int32Array));
    next.set(offsets.subarray(0, n));
    const total = offsets[n] as number;
    const units = (this.units = workArray(this.units, total, Int32Array));
    for (let u = 0; u < unitCount; u++) {
      const o = owner[u] as number;
      if (o < 0) continue;
      const at = next[o] as number;
      units[at] = u;
      next[o] = at + 1;
    }
    this.dead = workArray(this.dead, total, Uint8Array);
    this.dead.fill(0, 0, total);
    this.unsorted = workArray(this.unsorted, n, Uint8Array);
    this.given = new Array<number[] | undefined>(n).fill(undefined);
    this.lists = new Array<number[] | undefined>(n).fill(undefined);
  }
}
