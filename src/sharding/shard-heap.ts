/**
 * A binary min-heap of shard indices ordered by (load, unit count, index): the least-loaded shard first, ties
 * broken by fewer units then by name order, so the planner is deterministic and spreads weightless units evenly.
 */
export class ShardHeap {
  private readonly heap: Int32Array;

  /** Every shard 0 .. load.length-1, ordered by the given loads and unit counts (which the caller updates). */
  constructor(
    private readonly load: Float64Array,
    private readonly count: Int32Array,
  ) {
    this.heap = new Int32Array(load.length);
    for (let i = 0; i < this.heap.length; i++) this.heap[i] = i;
    for (let i = (this.heap.length >> 1) - 1; i >= 0; i--) this.down(i);
  }

  get size(): number {
    return this.heap.length;
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
    let i = start;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < h.length && this.less(h[l] as number, h[m] as number)) m = l;
      if (r < h.length && this.less(h[r] as number, h[m] as number)) m = r;
      if (m === i) return;
      const top = h[i] as number;
      h[i] = h[m] as number;
      h[m] = top;
      i = m;
    }
  }
}
