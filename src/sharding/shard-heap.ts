import { workArray } from './work-arrays.js';

/**
 * A binary min-heap of shard indices ordered by (load, unit count, index): the least-loaded shard first, ties
 * broken by fewer units then by name order, so the planner is deterministic and spreads weightless units evenly.
 * One heap serves every balance of a planner: {@link order} starts it over, keeping its array.
 */
export class ShardHeap {
  private heap = new Int32Array(0);
  private length = 0;
  private load: Float64Array = new Float64Array(0);
  private count: Int32Array = new Int32Array(0);

  /** Every shard 0 .. shardCount-1, ordered by the given loads and unit counts (which the caller updates). */
  order(load: Float64Array, count: Int32Array, shardCount: number): void {
    this.load = load;
    this.count = count;
    this.length = shardCount;
    const h = (this.heap = workArray(this.heap, shardCount, Int32Array));
    for (let i = 0; i < shardCount; i++) h[i] = i;
    for (let i = (shardCount >> 1) - 1; i >= 0; i--) this.down(i);
  }

  /** The least-loaded shard; call {@link updatedTop} after changing its load. */
  top(): number {
    return this.heap[0] as number;
  }

  updatedTop(): void {
    this.down(0);
  }

  private less(a: number, b: number): boolean {
    const la = this.load[a] as number;
    const lb = this.load[b] as number;
    if (la !== lb) return la < lb;
    const ca = this.count[a] as number;
    const cb = this.count[b] as number;
    return ca !== cb ? ca < cb : a < b;
  }

  private down(start: number): void {
    const h = this.heap;
    const length = this.length;
    let i = start;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < length && this.less(h[l] as number, h[m] as number)) m = l;
      if (r < length && this.less(h[r] as number, h[m] as number)) m = r;
      if (m === i) return;
      const top = h[i] as number;
      h[i] = h[m] as number;
      h[m] = top;
      i = m;
    }
  }
}
