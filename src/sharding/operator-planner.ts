import { InvalidConfigError } from '../errors.js';
import { Balancer } from './balance.js';
import { sortedUnique, type PlanningFleet } from './fleet.js';
import type { Assignment, ClusterInput, Move, OperatorInput, OperatorStats, PlanResult, ShardInput } from './plan-format.js';
import { compileSelector, matches } from './selector.js';
import { workArray } from './work-arrays.js';

type Unassigned = PlanResult['unassigned'][number];
type ShardUnits = Assignment['operators'][string];

/**
 * One operator's units and who owns them, kept in typed arrays indexed by unit so that a change re-balances only
 * the group it touches. Shards are kept in name order; `owner` holds shard indices.
 */
export class OperatorPlanner {
  readonly name: string;
  private shards: ShardInput[] = [];
  private home: (number | undefined)[] = [];
  private planned: number[] = [];
  private readonly owner: Int32Array;
  /** Units owned by a hand-written shard: never planned. */
  private readonly fixed: Uint8Array;
  private readonly inScope: Uint8Array;
  private readonly fixedUnassigned: Unassigned[] = [];
  /** Groups of clusters balanced together: all of them for a multicluster operator, else one each. */
  private readonly partitions: number[][];
  private readonly partitionOfCluster: Int32Array;
  private readonly partitionUnassigned: Unassigned[][];
  /** Units of each partition that the planner places (not fixed), in unit order. */
  private readonly partitionUnitList: Int32Array[];
  /** The assignment this plan started from, for the moves of {@link result}. */
  private readonly baseline: { names: string[]; owner: Int32Array; gone: Move[] };

  private readonly fleet: PlanningFleet;
  private readonly input: OperatorInput;
  /**
   * Work arrays every re-balance and change reuses: a long-lived planner's changes then make no fleet-sized garbage
   * (whose collection, a major GC of the fleet's heap, set their p95). A cold plan allocates each once.
   */
  private readonly balancer = new Balancer();
  private localWeights = new Float64Array(0);
  private localPrevious = new Int32Array(0);
  private toLocal = new Int32Array(0);
  private ownerBefore = new Int32Array(0);

  constructor(from: { fleet: PlanningFleet; input: OperatorInput; previous: ShardUnits | undefined }) {
    const { fleet, input, previous } = from;
    this.fleet = fleet;
    this.input = input;
    this.name = input.name;
    const U = fleet.unitCount;
    this.owner = new Int32Array(U).fill(-1);
    this.fixed = new Uint8Array(U);
    this.inScope = new Uint8Array(U);
    this.baseline = this.readPrevious(previous);
    this.setShards(sortedUnique(input.shards, `shard of operator ${input.name}`));
    this.placeFixed();
    const universe = this.universe();
    this.partitions = input.multicluster ? [universe] : universe.map((ci) => [ci]);
    this.partitionOfCluster = new Int32Array(fleet.clusters.length).fill(-1);
    this.partitions.forEach((clusters, p) => clusters.forEach((ci) => (this.partitionOfCluster[ci] = p)));
    this.partitionUnassigned = this.partitions.map(() => []);
    this.partitionUnitList = this.partitions.map((clusters) => this.unitsOf(clusters));
    const index = new Map(this.shards.map((s, i) => [s.name, i]));
    const B = fleet.bucketCount;
    const owning = new Uint8Array(this.shards.length);
    for (const clusters of this.partitions) {
      for (const ci of clusters) {
        for (let u = ci * B; u < (ci + 1) * B; u++) {
          if (this.fixed[u]) continue;
          this.inScope[u] = 1;
          const p = this.baseline.owner[u] as number;
          const o = p >= 0 ? (index.get(this.baseline.names[p] as string) ?? -1) : -1;
          this.owner[u] = o;
          if (o >= 0) owning[o] = 1;
        }
      }
    }
    const idle = previous ? idleShards(owning) : [];
    this.partitions.forEach((_, p) => this.rebalance(p, idle));
  }

  private readPrevious(previous: ShardUnits | undefined) {
    const names = Object.keys(previous ?? {}).sort();
    const owner = new Int32Array(this.fleet.unitCount).fill(-1);
    const gone: Move[] = [];
    names.forEach((name, i) => {
      for (const [cluster, buckets] of Object.entries(previous?.[name] ?? {})) {
        const ci = this.fleet.clusterIndex.get(cluster);
        for (const bucket of buckets) {
          if (ci === undefined || bucket >= this.fleet.bucketCount) gone.push({ operator: this.name, cluster, bucket, from: name, to: null, weight: 0 });
          else owner[ci * this.fleet.bucketCount + bucket] = i;
        }
      }
    });
    return { names, owner, gone };
  }

  private setShards(shards: ShardInput[]): void {
    this.shards = shards;
    this.home = shards.map((s) => this.fleet.clusterIndex.get(s.homeCluster));
    const planned: number[] = [];
    for (let i = 0; i < shards.length; i++) if ((shards[i] as ShardInput).buckets === undefined) planned.push(i);
    this.planned = planned;
  }

  /** Hand-written configs (and roots without clusters) own what their limits say, in their own cluster. */
  private placeFixed(): void {
    const B = this.fleet.bucketCount;
    this.shards.forEach((shard, si) => {
      const ci = this.home[si];
      for (const bucket of shard.buckets ?? []) {
        if (bucket >= B) throw new InvalidConfigError(`shard ${shard.name} of ${this.name}: bucket ${bucket} is not below the bucket count ${B}`);
        if (ci === undefined) {
          this.fixedUnassigned.push({ operator: this.name, cluster: shard.homeCluster, bucket, reason: `cluster ${shard.homeCluster} is not registered` });
          continue;
        }
        const u = ci * B + bucket;
        this.inScope[u] = 1;
        this.fixed[u] = 1;
        if (this.owner[u] === -1) this.owner[u] = si;
      }
    });
  }

  private universe(): number[] {
    if (this.planned.length === 0) return [];
    const within = this.input.within === undefined ? undefined : new Set(this.input.within);
    const all = this.fleet.clusters.flatMap((c, ci) => (within === undefined || within.has(c.name) ? [ci] : []));
    if (this.input.clusters) {
      const selector = compileSelector(this.input.clusters);
      return all.filter((ci) => matches(selector, this.fleet.clusters[ci]?.labels ?? {}));
    }
    const homes = new Set(this.planned.map((si) => this.home[si]));
    return all.filter((ci) => homes.has(ci));
  }

  /**
   * The shards that may own units of partition p right now; with moveOffline, not those homed in an Offline cluster.
   * `stranded` when moveOffline leaves none although some are planned: then nothing moves, since revoking their units
   * would leave them to nobody, and balancing among them would hand units to shards in Offline clusters.
   */
  private eligible(p: number): { shards: number[]; stranded: boolean } {
    const first = this.partitions[p]?.[0];
    const candidates = this.planned.filter((si) => {
      const ci = this.home[si];
      return ci !== undefined && (this.input.multicluster === true || ci === first);
    });
    if (!this.fleet.moveOffline) return { shards: candidates, stranded: false };
    const reachable = candidates.filter((si) => !this.fleet.offline[this.home[si] as number]);
    return { shards: reachable, stranded: reachable.length === 0 && candidates.length > 0 };
  }

  private unitsOf(clusters: readonly number[]): Int32Array {
    const B = this.fleet.bucketCount;
    const units = new Int32Array(clusters.length * B);
    let n = 0;
    for (const ci of clusters) {
      for (let u = ci * B; u < (ci + 1) * B; u++) if (!this.fixed[u]) units[n++] = u;
    }
    return n === units.length ? units : units.slice(0, n);
  }

  /** Re-balances one partition from its current owners; `joined` shards take work from the heaviest. */
  private rebalance(p: number, joined: readonly number[]): void {
    const units = this.partitionUnitList[p] as Int32Array;
    const { shards: eligible, stranded } = this.eligible(p);
    const unassigned: Unassigned[] = [];
    this.partitionUnassigned[p] = unassigned;
    const unowned = (u: number, reason: string): void => {
      unassigned.push({ operator: this.name, cluster: this.fleet.clusterOf(u), bucket: u % this.fleet.bucketCount, reason });
    };
    if (stranded) {
      for (const u of units) if (this.owner[u] === -1) unowned(u, 'every shard that may own it runs in an Offline cluster');
      return;
    }
    if (eligible.length === 0) {
      for (const u of units) {
        this.owner[u] = -1;
        const cluster = this.fleet.clusterOf(u);
        unowned(u, this.input.multicluster ? 'no shard runs in a registered cluster' : `no shard runs in cluster ${cluster} and the operator is not multicluster`);
      }
      return;
    }
    const toLocal = (this.toLocal = workArray(this.toLocal, this.shards.length, Int32Array));
    toLocal.fill(-1, 0, this.shards.length);
    eligible.forEach((si, k) => (toLocal[si] = k));
    const { owner } = this;
    const fleetWeights = this.fleet.weights;
    const weights = (this.localWeights = workArray(this.localWeights, units.length, Float64Array));
    const previous = (this.localPrevious = workArray(this.localPrevious, units.length, Int32Array));
    for (let k = 0; k < units.length; k++) {
      const u = units[k] as number;
      weights[k] = fleetWeights[u] as number;
      const o = owner[u] as number;
      previous[k] = o >= 0 ? (toLocal[o] as number) : -1;
    }
    const joinedLocal = joined.map((si) => toLocal[si] as number).filter((k) => k >= 0);
    const local = this.balancer.balance({ unitCount: units.length, weights, shardCount: eligible.length, previous, joined: joinedLocal });
    for (let k = 0; k < units.length; k++) {
      const l = local[k] as number;
      owner[units[k] as number] = l >= 0 ? (eligible[l] as number) : -1;
    }
  }

  private ownerName(u: number): string | null {
    const o = this.owner[u] as number;
    return o >= 0 ? (this.shards[o]?.name ?? null) : null;
  }

  /**
   * Runs a change on some partitions and returns the moves it caused. A change that renumbers the shards returns
   * how (old index -> new, -1 for a shard removed), so that owners compare as numbers, not names.
   */
  private changed(partitions: number[], change: () => Int32Array | undefined): Move[] {
    const unique = [...new Set(partitions)].filter((p) => p >= 0).sort((a, b) => a - b);
    // The shard list is replaced on a change, never altered: this one names the owners before it.
    const shardsBefore = this.shards;
    const { owner } = this;
    const before = (this.ownerBefore = workArray(this.ownerBefore, owner.length, Int32Array));
    for (const p of unique) {
      const units = this.partitionUnitList[p] as Int32Array;
      for (let k = 0; k < units.length; k++) {
        const u = units[k] as number;
        before[u] = owner[u] as number;
      }
    }
    const renumbered = change();
    const moves: Move[] = [];
    for (const p of unique) {
      const units = this.partitionUnitList[p] as Int32Array;
      for (let k = 0; k < units.length; k++) {
        const u = units[k] as number;
        const o = before[u] as number;
        const now = owner[u] as number;
        // Shard names are unique: the same shard, or nobody before and after, is no move.
        if (o < 0 ? now < 0 : now >= 0 && (renumbered ? renumbered[o] : o) === now) continue;
        const from = o >= 0 ? (shardsBefore[o] as ShardInput).name : null;
        moves.push({ operator: this.name, cluster: this.fleet.clusterOf(u), bucket: u % this.fleet.bucketCount, from, to: this.ownerName(u), weight: this.fleet.weights[u] as number });
      }
    }
    return moves;
  }

  /** The partitions a planned shard homed in cluster `ci` takes part in. */
  private partitionsOfHome(ci: number | undefined): number[] {
    if (this.input.multicluster) return this.partitions.length > 0 ? [0] : [];
    return ci === undefined ? [] : [this.partitionOfCluster[ci] as number];
  }

  /** After a unit's weight changed. */
  weightChanged(unit: number): Move[] {
    if (!this.inScope[unit] || this.fixed[unit]) return [];
    const p = this.partitionOfCluster[Math.floor(unit / this.fleet.bucketCount)] as number;
    return this.changed([p], () => {
      this.rebalance(p, []);
      return undefined;
    });
  }

  /** After a cluster turned Offline or back (only called when moving units of Offline clusters is configured). */
  healthChanged(ci: number): Move[] {
    const partitions = this.planned.some((si) => this.home[si] === ci) ? this.partitionsOfHome(ci) : [];
    return this.changed(partitions, () => {
      partitions.forEach((p) => this.rebalance(p, []));
      return undefined;
    });
  }

  /** A planned shard joins (it takes work from the heaviest shards) or leaves (its units go to the lightest). */
  shardsChanged(shards: ShardInput[], touchedHome: string): Move[] {
    const next = sortedUnique(shards, `shard of operator ${this.name}`);
    if (next.some((s) => s.buckets !== undefined) !== this.shards.some((s) => s.buckets !== undefined) || this.planned.length === 0) {
      throw new InvalidConfigError(`operator ${this.name}: changing hand-written shards needs a full plan`);
    }
    const partitions = this.partitionsOfHome(this.fleet.clusterIndex.get(touchedHome));
    if (partitions.length === 0 || partitions[0] === -1 || this.universeChanges(next)) {
      throw new InvalidConfigError(`operator ${this.name}: the change alters the clusters it spans; make a full plan`);
    }
    return this.changed(partitions, () => {
      const { remap, owning } = this.renumber(next);
      const idle = idleShards(owning);
      partitions.forEach((p) => this.rebalance(p, idle));
      return remap;
    });
  }

  /** Without a cluster selector the operator spans its shards' home clusters: a change of those is a new plan. */
  private universeChanges(next: readonly ShardInput[]): boolean {
    if (this.input.clusters !== undefined) return false;
    const spans = new Set(this.partitions.flat());
    const homes = new Set(next.map((s) => this.fleet.clusterIndex.get(s.homeCluster)));
    return homes.size !== spans.size || [...homes].some((ci) => ci === undefined || !spans.has(ci));
  }

  /**
   * Takes the next shard list: owners follow their shard to its new index (a removed shard's units have none).
   * Returns the new index of each old one (-1: removed) and, per new index, whether that shard owns a unit.
   */
  private renumber(next: ShardInput[]): { remap: Int32Array; owning: Uint8Array } {
    const old = this.shards;
    const remap = new Int32Array(old.length).fill(-1);
    // Both lists are sorted by name without repeats: one walk pairs them.
    for (let i = 0, j = 0; j < next.length; j++) {
      const name = (next[j] as ShardInput).name;
      while (i < old.length && (old[i] as ShardInput).name < name) i++;
      if (i < old.length && (old[i] as ShardInput).name === name) remap[i++] = j;
    }
    const { owner } = this;
    const owning = new Uint8Array(next.length);
    for (let u = 0; u < owner.length; u++) {
      const o = owner[u] as number;
      if (o < 0) continue;
      const renumbered = remap[o] as number;
      owner[u] = renumbered;
      if (renumbered >= 0) owning[renumbered] = 1;
    }
    this.setShards(next);
    return { remap, owning };
  }

  get shardList(): readonly ShardInput[] {
    return this.shards;
  }

  /**
   * Who owns what now, moves since the baseline, units nobody can own, and loads. The moves are listed when
   * `moves()` is called (a first plan moves every unit, and the hub reads only the assignment): until then they are
   * kept as unit numbers and shard indices, taken now, so what `moves()` returns never depends on later changes.
   */
  snapshot(): { shards: ShardUnits; moves: () => Move[]; unassigned: Unassigned[]; stats: OperatorStats } {
    const { fleet, owner, inScope } = this;
    const B = fleet.bucketCount;
    const S = this.shards.length;
    const names = this.shards.map((s) => s.name);
    const baselineOwner = this.baseline.owner;
    const baselineNames = this.baseline.names;
    const shards: ShardUnits = {};
    const loads: Record<string, number> = {};
    const records: Record<string, number[]>[] = [];
    for (const name of names) {
      const clusters: Record<string, number[]> = {};
      shards[name] = clusters;
      records.push(clusters);
      loads[name] = 0;
    }
    const current: number[][] = [];
    const currentCluster = new Int32Array(S).fill(-1);
    const loadOf = new Float64Array(S);
    // Who owned a unit before is the baseline's, which never changes: only the unit, its owner and weight are taken.
    let moved: { units: Int32Array; to: Int32Array; weights: Float64Array } | undefined;
    let moveCount = 0;
    let totalWeight = 0;
    let heaviestUnit = 0;
    let movedWeight = 0;
    let units = 0;
    for (let ci = 0; ci < fleet.clusters.length; ci++) {
      const cluster = (fleet.clusters[ci] as ClusterInput).name;
      for (let b = 0; b < B; b++) {
        const u = ci * B + b;
        const p = baselineOwner[u] as number;
        const scoped = inScope[u] === 1;
        if (!scoped && p < 0) continue;
        const o = owner[u] as number;
        const w = fleet.weights[u] as number;
        if (scoped) {
          units++;
          totalWeight += w;
          if (w > heaviestUnit) heaviestUnit = w;
        }
        if (o >= 0) {
          if (currentCluster[o] !== ci) {
            currentCluster[o] = ci;
            const buckets = [b];
            current[o] = buckets;
            (records[o] as Record<string, number[]>)[cluster] = buckets;
          } else {
            (current[o] as number[]).push(b);
          }
          loadOf[o] = (loadOf[o] as number) + w;
        }
        const from = p >= 0 ? (baselineNames[p] as string) : null;
        const to = o >= 0 ? (names[o] as string) : null;
        if (from !== to) {
          const n = fleet.unitCount;
          moved ??= { units: new Int32Array(n), to: new Int32Array(n), weights: new Float64Array(n) };
          moved.units[moveCount] = u;
          moved.to[moveCount] = o;
          moved.weights[moveCount] = w;
          moveCount++;
          movedWeight += w;
        }
      }
    }
    this.shards.forEach((s, i) => (loads[s.name] = loadOf[i] as number));
    const gone = this.baseline.gone;
    const operator = this.name;
    const clusterNames = fleet.clusters.map((c) => c.name);
    const moves = (): Move[] => {
      const list: Move[] = [];
      for (let k = 0; k < moveCount && moved; k++) {
        const u = moved.units[k] as number;
        const p = baselineOwner[u] as number;
        const o = moved.to[k] as number;
        list.push({
          operator,
          cluster: clusterNames[Math.floor(u / B)] as string,
          bucket: u % B,
          from: p >= 0 ? (baselineNames[p] as string) : null,
          to: o >= 0 ? (names[o] as string) : null,
          weight: moved.weights[k] as number,
        });
      }
      for (const m of gone) list.push(m);
      return list;
    };
    return {
      shards,
      moves,
      unassigned: [...this.fixedUnassigned, ...this.partitionUnassigned.flat()],
      stats: { units, totalWeight, heaviestUnit, movedWeight, loads },
    };
  }
}

/**
 * The shards that own no unit (`owning[i]` is 0): they take work from the heaviest (`Balancer`). Owning nothing, not
 * being new, is what counts: a shard the previous plan named but that got no unit yet (its moves wait until its proxy
 * serves, src/hub/handover.ts) would otherwise stay empty for good wherever one heavy unit raises the balance bound
 * (test/unit/sharding/planner.test.ts, "a shard the previous plan named but that owns nothing").
 */
function idleShards(owning: Uint8Array): number[] {
  const idle: number[] = [];
  owning.forEach((owns, i) => {
    if (!owns) idle.push(i);
  });
  return idle;
}
