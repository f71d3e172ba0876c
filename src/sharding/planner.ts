import { InvalidConfigError } from '../errors.js';
import { PlanningFleet, sortedUnique } from './fleet.js';
import { OperatorPlanner } from './operator-planner.js';
import type { Assignment, ClusterHealth, Move, PlanInput, PlanResult, ShardInput } from './plan-format.js';

/** One change the planner can apply without planning from scratch. */
export type PlanChange =
  | { type: 'objects'; cluster: string; namespace: string; objects: number }
  | { type: 'health'; cluster: string; health: ClusterHealth }
  | { type: 'addShard'; operator: string; shard: ShardInput }
  | { type: 'removeShard'; operator: string; shard: string };

/**
 * The cross-cluster planner. Construction plans every operator from the input and the previous assignment;
 * {@link Planner.apply} then takes one change at a time and re-balances only the group of units it touches.
 * Pure: no I/O, no clock, no randomness; inputs are sorted by name first, so their order never matters.
 */
export class Planner {
  private readonly fleet: PlanningFleet;
  private readonly operators: OperatorPlanner[];
  private readonly vanished: Move[] = [];

  constructor(input: PlanInput, previous?: Assignment) {
    this.fleet = new PlanningFleet(input);
    this.operators = sortedUnique(input.operators, 'operator').map((op) => new OperatorPlanner({ fleet: this.fleet, input: op, previous: previous?.operators[op.name] }));
    const known = new Set(this.operators.map((o) => o.name));
    // An operator that disappeared gives back everything it owned.
    for (const name of Object.keys(previous?.operators ?? {}).sort()) {
      if (known.has(name)) continue;
      for (const [shard, clusters] of Object.entries(previous?.operators[name] ?? {})) {
        for (const [cluster, buckets] of Object.entries(clusters)) {
          for (const bucket of buckets) this.vanished.push({ operator: name, cluster, bucket, from: shard, to: null, weight: 0 });
        }
      }
    }
  }

  private operator(name: string): OperatorPlanner {
    const op = this.operators.find((o) => o.name === name);
    if (!op) throw new InvalidConfigError(`operator ${name} is not in the plan`);
    return op;
  }

  /** Applies one change and returns the moves it causes (none while the balance bound still holds). */
  apply(change: PlanChange): Move[] {
    switch (change.type) {
      case 'objects': {
        const u = this.fleet.setObjects(change.cluster, change.namespace, change.objects);
        return u < 0 ? [] : this.operators.flatMap((op) => op.weightChanged(u));
      }
      case 'health': {
        const ci = this.fleet.setHealth(change.cluster, change.health);
        // Health alone moves nothing unless moving units of Offline clusters is configured: no churn on flapping.
        return ci < 0 || !this.fleet.moveOffline ? [] : this.operators.flatMap((op) => op.healthChanged(ci));
      }
      case 'addShard': {
        const op = this.operator(change.operator);
        return op.shardsChanged([...op.shardList, change.shard], change.shard.homeCluster);
      }
      case 'removeShard': {
        const op = this.operator(change.operator);
        const removed = op.shardList.find((s) => s.name === change.shard);
        if (!removed) throw new InvalidConfigError(`operator ${change.operator} has no shard ${change.shard}`);
        return op.shardsChanged(op.shardList.filter((s) => s !== removed), removed.homeCluster);
      }
    }
  }

  /**
   * The current assignment, with the moves from the previous assignment given at construction. `moves` is listed
   * when first read (then kept): a first plan moves every unit, and the hub reads only the assignment.
   */
  result(): PlanResult {
    const result: PlanResult = { assignment: { operators: {} }, moves: [], unassigned: [], stats: {} };
    const lists: (() => Move[])[] = [];
    for (const op of this.operators) {
      const snap = op.snapshot();
      result.assignment.operators[op.name] = snap.shards;
      lists.push(snap.moves);
      for (const u of snap.unassigned) result.unassigned.push(u);
      result.stats[op.name] = snap.stats;
    }
    const vanished = [...this.vanished];
    const listMoves = (): Move[] => {
      const moves: Move[] = [];
      // A loop, not push(...): a first plan has a move per unit, too many for spread arguments.
      for (const list of lists) for (const m of list()) moves.push(m);
      for (const m of vanished) moves.push(m);
      return moves;
    };
    // Redefined in place, so `moves` keeps its place among the keys; reading or setting it makes it a plain value.
    const settle = (moves: Move[]): void => {
      Object.defineProperty(result, 'moves', { value: moves, writable: true, enumerable: true, configurable: true });
    };
    Object.defineProperty(result, 'moves', {
      enumerable: true,
      configurable: true,
      get: () => {
        const moves = listMoves();
        settle(moves);
        return moves;
      },
      set: settle,
    });
    return result;
  }
}

/** Plans from the input and the previous assignment in one call. */
export function plan(input: PlanInput, previous?: Assignment): PlanResult {
  return new Planner(input, previous).result();
}
