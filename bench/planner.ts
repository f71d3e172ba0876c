import {
  balanceBound,
  bucketOf,
  createHashSettings,
  plan,
  Planner,
  UNIT_BASE_WEIGHT,
  type PlanChange,
  type PlanInput,
  type PlanResult,
} from '../src/sharding/index.js';
import { collectGarbage, round, sampleMs, seededRandom, type Benchmark, type BenchRow } from './harness.js';

const CLUSTERS = 1000;
const SHARDS = 200;
const NAMESPACES_PER_CLUSTER = 20;
const OPERATOR = 'ops/root';

/** 1,000 clusters with 20 namespaces each; object counts heavy-tailed (most small, a few large). */
function fleet(random: () => number): PlanInput {
  const clusters = Array.from({ length: CLUSTERS }, (_, i) => ({ name: `cluster-${String(i).padStart(4, '0')}`, labels: { fleet: 'prod' } }));
  const weights = clusters.flatMap((c) =>
    Array.from({ length: NAMESPACES_PER_CLUSTER }, (_, j) => ({
      cluster: c.name,
      namespace: `team-${j}-${Math.floor(random() * 40)}`,
      objects: Math.min(3000, Math.floor(20 / (1 - random()) ** 0.7)),
    })),
  );
  const shards = Array.from({ length: SHARDS }, (_, i) => ({ name: `shard-${String(i).padStart(3, '0')}`, homeCluster: clusters[i % CLUSTERS]!.name }));
  return { clusters, weights, operators: [{ name: OPERATOR, clusters: { matchLabels: { fleet: 'prod' } }, multicluster: true, shards }] };
}

function unitWeights(input: PlanInput): Float64Array {
  const settings = createHashSettings();
  const index = new Map(input.clusters.map((c, i) => [c.name, i]));
  const w = new Float64Array(input.clusters.length * settings.bucketCount).fill(UNIT_BASE_WEIGHT);
  for (const x of input.weights) {
    const u = index.get(x.cluster)! * settings.bucketCount + bucketOf(x.namespace, settings);
    w[u] = w[u]! + x.objects;
  }
  return w;
}

/** The naive baseline: unit i goes to shard i mod N. Returns max/mean and the weight moved when N changes. */
function roundRobin(weights: Float64Array, n: number, next: number) {
  const loads = new Float64Array(n);
  let moved = 0;
  weights.forEach((w, i) => {
    loads[i % n] = loads[i % n]! + w;
    if (i % n !== i % next) moved += w;
  });
  const total = weights.reduce((a, b) => a + b, 0);
  return { maxOverMean: Math.max(...loads) / (total / n), moved };
}

function balanceFigures(result: PlanResult, shards: number) {
  const s = result.stats[OPERATOR]!;
  const mean = s.totalWeight / shards;
  const max = Math.max(...Object.values(s.loads));
  return { maxOverMean: round(max / mean, 4), boundOverMean: round(balanceBound(s.totalWeight, shards, s.heaviestUnit) / mean, 4), withinBound: max <= balanceBound(s.totalWeight, shards, s.heaviestUnit) };
}

const benchmark: Benchmark = {
  name: 'planner',
  description: `cross-cluster planner, ${CLUSTERS} clusters x 32 buckets x ${SHARDS} shards (multicluster), from scratch and one change at a time`,
  run: ({ progress }) => {
    const input = fleet(seededRandom(42));
    const weights = unitWeights(input);
    const total = weights.reduce((a, b) => a + b, 0);
    const heaviest = Math.max(...weights);
    const rows: BenchRow[] = [];

    progress('from scratch');
    let first: PlanResult | undefined;
    const scratch = sampleMs(() => (first = plan(input)), { runs: 15, prepare: () => undefined });
    rows.push({ case: 'from scratch', ...scratch, units: weights.length, ...balanceFigures(first!, SHARDS) });
    // The result lists its moves when they are first read (the hub never does): here they are, one per unit.
    progress('from scratch, moves listed');
    let moveCount = 0;
    const listed = sampleMs(() => (moveCount = plan(input).moves.length), { runs: 15, prepare: () => undefined });
    rows.push({ case: 'from scratch, moves listed', ...listed, moves: moveCount });

    const removed = input.operators[0]!.shards.find((s) => s.name === 'shard-100')!;
    const namespace = input.weights[5]!;
    // Each change with the change that undoes it: the long-lived planner below takes one after the other.
    const changes: [string, PlanChange, (moved: number, result: PlanResult) => Record<string, number | boolean>, PlanChange][] = [
      [
        'add a shard',
        { type: 'addShard', operator: OPERATOR, shard: { name: 'shard-new', homeCluster: 'cluster-0007' } },
        (moved, result) => {
          const rr = roundRobin(weights, SHARDS, SHARDS + 1);
          return {
            movedOverFairShare: round(moved / (total / (SHARDS + 1)), 3),
            movedBoundOverFairShare: round((1.05 * total) / (SHARDS + 1) / (total / (SHARDS + 1)) + heaviest / (total / (SHARDS + 1)), 3),
            roundRobinMovedOverFairShare: round(rr.moved / (total / (SHARDS + 1)), 1),
            ...balanceFigures(result, SHARDS + 1),
          };
        },
        { type: 'removeShard', operator: OPERATOR, shard: 'shard-new' },
      ],
      [
        'remove a shard',
        { type: 'removeShard', operator: OPERATOR, shard: 'shard-100' },
        (moved, result) => {
          const removedLoad = first!.stats[OPERATOR]!.loads['shard-100']!;
          const rr = roundRobin(weights, SHARDS, SHARDS - 1);
          return {
            movedOverRemovedLoad: round(moved / removedLoad, 3),
            roundRobinMovedOverRemovedLoad: round(rr.moved / removedLoad, 1),
            ...balanceFigures(result, SHARDS - 1),
          };
        },
        { type: 'addShard', operator: OPERATOR, shard: removed },
      ],
      [
        'objects of one namespace x1.2',
        { type: 'objects', cluster: namespace.cluster, namespace: namespace.namespace, objects: Math.round(namespace.objects * 1.2) },
        (_moved, result) => balanceFigures(result, SHARDS),
        { type: 'objects', ...namespace },
      ],
      [
        'one cluster goes Offline',
        { type: 'health', cluster: 'cluster-0003', health: 'Offline' },
        (_moved, result) => balanceFigures(result, SHARDS),
        { type: 'health', cluster: 'cluster-0003', health: 'Ready' },
      ],
    ];
    // Each change on a planner built for it, whose building's garbage is collected before the clock runs.
    for (const [name, change, figures] of changes) {
      progress(name);
      let moves = 0;
      let moved = 0;
      let planner: Planner | undefined;
      const timing = sampleMs(
        (p: Planner) => {
          const m = p.apply(change);
          moves = m.length;
          moved = m.reduce((a, x) => a + x.weight, 0);
          planner = p;
        },
        {
          runs: 15,
          prepare: () => {
            const fresh = new Planner(input);
            collectGarbage();
            return fresh;
          },
        },
      );
      rows.push({ case: `incremental: ${name}`, ...timing, moves, ...figures(moved, planner!.result()) });
    }
    // As a long-lived planner takes changes: one planner, each timed change undone (untimed) before the next; 10
    // untimed rounds first, so V8's background compilation (process CPU too) is done before the clock runs.
    const live = new Planner(input);
    for (const [name, change, , undo] of changes) {
      progress(`${name}, one long-lived planner`);
      let applied = false;
      const prepare = (): Planner => {
        if (applied) live.apply(undo);
        applied = false;
        return live;
      };
      const timing = sampleMs(
        (p: Planner) => {
          p.apply(change);
          applied = true;
        },
        { runs: 31, warmup: 10, prepare },
      );
      rows.push({ case: `incremental, long-lived planner: ${name}`, ...timing });
    }
    const rr = roundRobin(weights, SHARDS, SHARDS);
    rows.push({ case: 'baseline: round-robin from scratch', maxOverMean: round(rr.maxOverMean, 4) });
    return rows;
  },
};

export default benchmark;
