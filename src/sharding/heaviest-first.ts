import { workArray } from './work-arrays.js';

const INDEX_BITS = 2 ** 21;

/** Below this many units a native sort beats counting (its table is as long as the heaviest weight). */
const COUNTING_MIN_UNITS = 256;

/**
 * Sorts units by weight, heaviest first, ties by unit number. Whole weights (object counts) no larger than a few
 * times the number of units (a first plan's) are counted into place, in linear time; other whole weights are packed
 * with the unit number into one float and sorted natively; only fractional ones need a comparator. The work arrays
 * are kept for the next sort, so a long-lived planner's changes do not allocate them again.
 */
export class HeaviestFirst {
  private keys = new Float64Array(0);
  private order = new Int32Array(0);
  private runs = new Int32Array(0);

  /** Sorts the first `length` entries of `units` in place. */
  sort(units: Int32Array, length: number, weights: ArrayLike<number>): void {
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
      this.count(units, length, weights, heaviest, ascending);
      return;
    }
    const keys = (this.keys = workArray(this.keys, length, Float64Array));
    for (let i = 0; i < length; i++) {
      const u = units[i] as number;
      keys[i] = (weights[u] as number) * INDEX_BITS + (INDEX_BITS - 1 - u);
    }
    // A view of the kept array: its length must be the sort's.
    keys.subarray(0, length).sort();
    for (let i = 0; i < length; i++) {
      const key = keys[length - 1 - i] as number;
      units[i] = INDEX_BITS - 1 - (key % INDEX_BITS);
    }
  }

  /** Counting sort by whole weight, heaviest first; units of one weight keep ascending order (sorted first if need be). */
  private count(units: Int32Array, length: number, weights: ArrayLike<number>, heaviest: number, ascending: boolean): void {
    const order = (this.order = workArray(this.order, length, Int32Array));
    order.set(units.subarray(0, length));
    if (!ascending) order.subarray(0, length).sort();
    // First index of each weight's run: the number of units heavier than it.
    const next = (this.runs = workArray(this.runs, heaviest + 1, Int32Array));
    next.fill(0, 0, heaviest + 1);
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
}
