import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { balanceBound, plan, Planner, type Assignment, type PlanInput, type PlanResult } from '../../../src/sharding/index.js';

const HEALTH = ['Ready', 'Unknown', 'Offline'] as const;

/** A small random fleet: up to 5 clusters, namespaces with object counts, one operator with 1-7 shards. */
function fleetArb(multicluster: boolean | undefined = undefined): fc.Arbitrary<PlanInput> {
  return fc
    .record({
      clusterCount: fc.integer({ min: 1, max: 5 }),
      health: fc.array(fc.constantFrom(...HEALTH), { minLength: 5, maxLength: 5 }),
      weights: fc.array(fc.record({ c: fc.nat(4), ns: fc.stringMatching(/^[a-z]{1,6}-[0-9]$/), objects: fc.nat(2000) }), { maxLength: 60 }),
      shardHomes: fc.array(fc.nat(4), { minLength: 1, maxLength: 7 }),
      multicluster: multicluster === undefined ? fc.boolean() : fc.constant(multicluster),
      bucketCount: fc.constantFrom(8, 32),
    })
    .map(({ clusterCount, health, weights, shardHomes, multicluster: mc, bucketCount }) => ({
      hash: { algorithm: 'fnv' as const, bucketCount },
      clusters: Array.from({ length: clusterCount }, (_, i) => ({ name: `c${i}`, labels: { fleet: 'prod' }, health: health[i] })),
      weights: weights.map((w) => ({ cluster: `c${w.c % clusterCount}`, namespace: w.ns, objects: w.objects })),
      operators: [
        {
          name: 'ops/root',
          clusters: { matchLabels: { fleet: 'prod' } },
          multicluster: mc,
          shards: shardHomes.map((h, i) => ({ name: `s${i}`, homeCluster: `c${h % clusterCount}` })),
        },
      ],
    }));
}

function owners(result: PlanResult, operator = 'ops/root'): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (const [shard, clusters] of Object.entries(result.assignment.operators[operator] ?? {})) {
    for (const [cluster, buckets] of Object.entries(clusters)) {
      for (const b of buckets) map.set(`${cluster}/${b}`, [...(map.get(`${cluster}/${b}`) ?? []), shard]);
    }
  }
  return map;
}

function stats(result: PlanResult) {
  return result.stats['ops/root']!;
}

function withWeights(input: PlanInput, weights: PlanInput['weights']): PlanInput {
  return { ...input, weights };
}

function shards(input: PlanInput) {
  return input.operators[0]!.shards;
}

function withShards(input: PlanInput, list: PlanInput['operators'][number]['shards']): PlanInput {
  return { ...input, operators: [{ ...input.operators[0]!, shards: list }] };
}

function maxLoad(result: PlanResult): number {
  return Math.max(...Object.values(stats(result).loads));
}

describe('plan: ownership and determinism', () => {
  it('gives every unit exactly one owner, or says why it has none (property)', () => {
    fc.assert(
      fc.property(fleetArb(), (input) => {
        const result = plan(input);
        const own = owners(result);
        for (const list of own.values()) expect(list).toHaveLength(1);
        const B = input.hash!.bucketCount!;
        expect(own.size + result.unassigned.length).toBe(input.clusters.length * B);
        if (input.operators[0]!.multicluster) expect(result.unassigned).toEqual([]);
      }),
    );
  });

  it('gives the same output for the same input, in any order (property)', () => {
    fc.assert(
      fc.property(fleetArb(), fc.integer(), (input, seed) => {
        const shuffle = <T,>(xs: readonly T[]): T[] => {
          const out = [...xs];
          let s = seed;
          for (let i = out.length - 1; i > 0; i--) {
            s = (Math.imul(s, 1103515245) + 12345) | 0;
            const j = Math.abs(s) % (i + 1);
            [out[i], out[j]] = [out[j] as T, out[i] as T];
          }
          return out;
        };
        const shuffled: PlanInput = {
          ...input,
          clusters: shuffle(input.clusters),
          weights: shuffle(input.weights),
          operators: [{ ...input.operators[0]!, shards: shuffle(shards(input)) }],
        };
        const a = plan(input);
        expect(JSON.stringify(plan(shuffled))).toBe(JSON.stringify(a));
        expect(JSON.stringify(plan(input, a.assignment))).toBe(JSON.stringify(plan(shuffled, a.assignment)));
      }),
    );
  });

  it('gives units of a cluster only to shards that can reach it (property)', () => {
    fc.assert(
      fc.property(fleetArb(false), (input) => {
        const home = new Map(shards(input).map((s) => [s.name, s.homeCluster]));
        for (const [unit, [shard]] of owners(plan(input))) expect(home.get(shard!)).toBe(unit.split('/')[0]);
      }),
    );
  });
});

describe('plan: balance', () => {
  it('keeps the heaviest shard within max(1.05 x mean, mean + heaviest unit) when every shard reaches every unit (property)', () => {
    fc.assert(
      fc.property(fleetArb(true), (input) => {
        const result = plan(input);
        const s = stats(result);
        expect(maxLoad(result)).toBeLessThanOrEqual(balanceBound(s.totalWeight, shards(input).length, s.heaviestUnit) + 1e-9);
      }),
    );
  });

  it('keeps the bound per cluster, among the shards running there, for a non-multicluster operator (property)', () => {
    fc.assert(
      fc.property(fleetArb(false), (input) => {
        const result = plan(input);
        const s = stats(result);
        for (const cluster of input.clusters) {
          const local = shards(input).filter((x) => x.homeCluster === cluster.name);
          if (local.length === 0) continue;
          const loads = local.map((x) => s.loads[x.name]!);
          const total = loads.reduce((a, b) => a + b, 0);
          const bound = balanceBound(total, local.length, heaviestUnitOf(input, cluster.name));
          expect(Math.max(...loads)).toBeLessThanOrEqual(bound + 1e-9);
        }
      }),
    );
  });
});

/** The heaviest unit of one cluster, as the planner weighs it. */
function heaviestUnitOf(input: PlanInput, cluster: string): number {
  const single: PlanInput = {
    ...input,
    clusters: input.clusters.filter((c) => c.name === cluster),
    operators: [{ name: 'ops/root', multicluster: true, shards: [{ name: 'probe', homeCluster: cluster }] }],
  };
  return plan(single).stats['ops/root']!.heaviestUnit;
}

describe('plan: movement', () => {
  it('adding a shard moves at most 1.05 x total/(N+1) + the heaviest unit (property)', () => {
    fc.assert(
      fc.property(fleetArb(true), fc.nat(4), (input, home) => {
        const before = plan(input);
        const n = shards(input).length;
        const grown = withShards(input, [...shards(input), { name: 'zz-new', homeCluster: input.clusters[home % input.clusters.length]!.name }]);
        const after = plan(grown, before.assignment);
        const s = stats(after);
        expect(s.movedWeight).toBeLessThanOrEqual((1.05 * s.totalWeight) / (n + 1) + s.heaviestUnit + 1e-9);
        expect(maxLoad(after)).toBeLessThanOrEqual(balanceBound(s.totalWeight, n + 1, s.heaviestUnit) + 1e-9);
        expect(after.moves.every((m) => m.to === 'zz-new' || m.from !== null)).toBe(true);
      }),
    );
  });

  it('a joined shard takes work even when the heaviest shard holds one unit too big to move', () => {
    const input: PlanInput = {
      clusters: [{ name: 'a' }],
      weights: [{ cluster: 'a', namespace: 'x', objects: 100 }],
      operators: [{ name: 'ops/root', multicluster: true, shards: Array.from({ length: 25 }, (_, i) => ({ name: `s${String(i).padStart(2, '0')}`, homeCluster: 'a' })) }],
    };
    const planner = new Planner(input);
    const moves = planner.apply({ type: 'addShard', operator: 'ops/root', shard: { name: 'zz', homeCluster: 'a' } });
    expect(moves.length).toBeGreaterThan(0);
    expect(moves.every((m) => m.to === 'zz')).toBe(true);
    expect(planner.result().stats['ops/root']!.loads.zz).toBeGreaterThan(0);
  });

  it('a shard the previous plan named but that owns nothing takes work, beside a unit that raises the bound', () => {
    const small = Array.from({ length: 40 }, (_, i) => ({ cluster: 'a', namespace: `ns-${i}`, objects: 2 }));
    const input: PlanInput = {
      clusters: [{ name: 'a' }],
      weights: [{ cluster: 'a', namespace: 'heavy', objects: 5_000 }, ...small],
      operators: [{ name: 'ops/root', multicluster: true, shards: ['s1', 's2', 's3'].map((name) => ({ name, homeCluster: 'a' })) }],
    };
    const two = plan({ ...input, operators: [{ ...input.operators[0]!, shards: input.operators[0]!.shards.slice(0, 2) }] });
    // s3 named with nothing, as the hub's intended ownership names a shard whose moves wait for it to serve.
    const previous = { operators: { 'ops/root': { ...two.assignment.operators['ops/root'], s3: {} } } };
    const three = plan(input, previous);
    expect(three.stats['ops/root']!.loads.s3).toBeGreaterThan(0);
    // Again from that plan: nothing moves back and forth.
    expect(plan(input, three.assignment).moves).toEqual([]);
  });

  it('removing a shard moves at most 1.05 x its weight + the heaviest unit (property)', () => {
    fc.assert(
      fc.property(
        fleetArb(true).filter((i) => shards(i).length > 1),
        fc.nat(6),
        (input, pick) => {
          const before = plan(input);
          const list = shards(input);
          const removed = list[pick % list.length]!;
          const after = plan(withShards(input, list.filter((s) => s !== removed)), before.assignment);
          const s = stats(after);
          expect(s.movedWeight).toBeLessThanOrEqual(1.05 * stats(before).loads[removed.name]! + s.heaviestUnit + 1e-9);
          expect(after.moves.every((m) => m.from === removed.name)).toBe(true);
        },
      ),
    );
  });

  it('a change of weights moves nothing while the old assignment stays within the bound (property)', () => {
    fc.assert(
      fc.property(fleetArb(true), fc.array(fc.nat(2000), { minLength: 60, maxLength: 60 }), (input, counts) => {
        const before = plan(input);
        const changed = withWeights(input, input.weights.map((w, i) => ({ ...w, objects: counts[i]! })));
        // The old assignment under the new weights: re-plan with the old owners and read their loads.
        const after = plan(changed, before.assignment);
        const s = stats(after);
        const bound = balanceBound(s.totalWeight, shards(input).length, s.heaviestUnit);
        const keptLoads = loadsOf(before.assignment, changed);
        if (Math.max(...Object.values(keptLoads)) <= bound) expect(after.moves).toEqual([]);
        expect(maxLoad(after)).toBeLessThanOrEqual(bound + 1e-9);
      }),
    );
  });

  it('a cluster turning unhealthy moves nothing by itself (property)', () => {
    fc.assert(
      fc.property(fleetArb(), fc.array(fc.constantFrom(...HEALTH), { minLength: 5, maxLength: 5 }), (input, health) => {
        const before = plan(input);
        const flapped: PlanInput = { ...input, clusters: input.clusters.map((c, i) => ({ ...c, health: health[i] })) };
        const after = plan(flapped, before.assignment);
        expect(after.moves).toEqual([]);
        expect(after.assignment).toEqual(before.assignment);
      }),
    );
  });

  it('moves the units of shards in an Offline cluster only when configured', () => {
    const input: PlanInput = {
      clusters: [{ name: 'a' }, { name: 'b' }],
      weights: [],
      operators: [{ name: 'ops/root', multicluster: true, shards: [{ name: 's-a', homeCluster: 'a' }, { name: 's-b', homeCluster: 'b' }] }],
    };
    const before = plan(input);
    const down: PlanInput = { ...input, clusters: [{ name: 'a', health: 'Offline' }, { name: 'b' }] };
    expect(plan(down, before.assignment).moves).toEqual([]);
    const moved = plan({ ...down, options: { moveUnitsOfOfflineClusters: true } }, before.assignment);
    expect(moved.assignment.operators['ops/root']!['s-a']).toEqual({});
    expect(moved.moves.every((m) => m.from === 's-a' && m.to === 's-b')).toBe(true);
    expect(moved.moves).toHaveLength(32);
  });

  it('keeps the units of shards in an Offline cluster when no shard elsewhere may take them', () => {
    const options = { moveUnitsOfOfflineClusters: true };
    // Not multicluster: a cluster's units go only to shards running there.
    const single: PlanInput = {
      clusters: [{ name: 'a' }, { name: 'b' }],
      weights: [],
      operators: [{ name: 'ops/root', clusters: {}, shards: [{ name: 's-a', homeCluster: 'a' }, { name: 's-b', homeCluster: 'b' }] }],
    };
    const before = plan(single);
    const down = plan({ ...single, clusters: [{ name: 'a', health: 'Offline' }, { name: 'b' }], options }, before.assignment);
    expect(down.moves).toEqual([]);
    expect(down.unassigned).toEqual([]);
    expect(down.assignment).toEqual(before.assignment);
    // Multicluster, every cluster Offline: nothing moves either.
    const multi: PlanInput = { ...single, operators: [{ ...single.operators[0]!, multicluster: true }] };
    const was = plan(multi);
    const allDown = plan({ ...multi, clusters: [{ name: 'a', health: 'Offline' }, { name: 'b', health: 'Offline' }], options }, was.assignment);
    expect(allDown.moves).toEqual([]);
    expect(allDown.assignment).toEqual(was.assignment);
    // Nor does it balance among them: a failed-over assignment stays where it is while every cluster is Offline.
    const failedOver = plan({ ...multi, clusters: [{ name: 'a' }, { name: 'b', health: 'Offline' }], options }, was.assignment);
    expect(Object.values(failedOver.assignment.operators['ops/root']!['s-b']!).flat()).toEqual([]);
    const stillDown = plan({ ...multi, clusters: [{ name: 'a', health: 'Offline' }, { name: 'b', health: 'Offline' }], options }, failedOver.assignment);
    expect(stillDown.moves).toEqual([]);
  });
});

/** Loads of an assignment under the given weights (plan with the assignment fixed, every shard hand-written). */
function loadsOf(assignment: Assignment, input: PlanInput): Record<string, number> {
  const fixed: PlanInput = {
    ...input,
    operators: [
      {
        name: 'ops/root',
        multicluster: true,
        shards: Object.entries(assignment.operators['ops/root']!).flatMap(([name, clusters]) =>
          Object.entries(clusters).map(([cluster, buckets]) => ({ name: `${name}@${cluster}`, homeCluster: cluster, buckets })),
        ),
      },
    ],
  };
  const perCluster = plan(fixed).stats['ops/root']!.loads;
  const loads: Record<string, number> = {};
  for (const [name, load] of Object.entries(perCluster)) {
    const shard = name.split('@')[0]!;
    loads[shard] = (loads[shard] ?? 0) + load;
  }
  return loads;
}

describe('plan: hand-written shards and formats', () => {
  it('keeps hand-written shards on the buckets their limits name, in their own cluster', () => {
    const input: PlanInput = {
      hash: { algorithm: 'kusionstack' },
      clusters: [{ name: 'a' }, { name: 'b' }],
      weights: [{ cluster: 'a', namespace: 'ns-a', objects: 10 }],
      operators: [{ name: 'operator-demo/sharding-demo', shards: [{ name: 'sharding-demo', homeCluster: 'a', buckets: [15, 16] }] }],
    };
    const result = plan(input);
    expect(result.assignment.operators['operator-demo/sharding-demo']).toEqual({ 'sharding-demo': { a: [15, 16] } });
    expect(result.stats['operator-demo/sharding-demo']!.loads['sharding-demo']).toBe(11 + 1);
    expect(plan(input, result.assignment).moves).toEqual([]);
  });

  it('lists grants from nobody on a first plan, and revokes for an operator that went away', () => {
    const input: PlanInput = { clusters: [{ name: 'a' }], weights: [], operators: [{ name: 'o', shards: [{ name: 's', homeCluster: 'a' }] }] };
    const first = plan(input);
    expect(first.moves).toHaveLength(32);
    expect(first.moves[0]).toEqual({ operator: 'o', cluster: 'a', bucket: 0, from: null, to: 's', weight: 1 });
    const gone = plan({ ...input, operators: [] }, first.assignment);
    expect(gone.moves).toHaveLength(32);
    expect(gone.moves.every((m) => m.to === null)).toBe(true);
  });

  it('reports units no shard can reach', () => {
    const result = plan({
      hash: { bucketCount: 2 },
      clusters: [{ name: 'a', labels: { x: '1' } }, { name: 'b', labels: { x: '1' } }],
      weights: [],
      operators: [{ name: 'o', clusters: { matchLabels: { x: '1' } }, shards: [{ name: 's', homeCluster: 'a' }] }],
    });
    expect(result.unassigned).toEqual([
      { operator: 'o', cluster: 'b', bucket: 0, reason: 'no shard runs in cluster b and the operator is not multicluster' },
      { operator: 'o', cluster: 'b', bucket: 1, reason: 'no shard runs in cluster b and the operator is not multicluster' },
    ]);
  });
});

describe('Planner.apply (incremental)', () => {
  it('gives the same assignment as a full plan from the previous one, for each kind of change (property)', () => {
    fc.assert(
      fc.property(fleetArb(), fc.nat(6), fc.nat(2000), fc.constantFrom(...HEALTH), (input, pick, objects, health) => {
        const planner = new Planner(input);
        const before = planner.result().assignment;
        const list = shards(input);
        const home = list[pick % list.length]!.homeCluster;
        const weight = input.weights[pick % Math.max(1, input.weights.length)];
        const steps: [Parameters<Planner['apply']>[0], PlanInput][] = [
          [{ type: 'addShard', operator: 'ops/root', shard: { name: 'zz-new', homeCluster: home } }, withShards(input, [...list, { name: 'zz-new', homeCluster: home }])],
        ];
        if (list.length > 1) {
          const removed = list[pick % list.length]!;
          steps.push([{ type: 'removeShard', operator: 'ops/root', shard: removed.name }, withShards(input, list.filter((s) => s !== removed))]);
        }
        if (weight) {
          steps.push([
            { type: 'objects', cluster: weight.cluster, namespace: weight.namespace, objects },
            // A namespace's new count replaces what was reported for it (listed entries add up).
            withWeights(input, [
              ...input.weights.filter((w) => w.cluster !== weight.cluster || w.namespace !== weight.namespace),
              { cluster: weight.cluster, namespace: weight.namespace, objects },
            ]),
          ]);
        }
        for (const [change, changedInput] of steps) {
          const fresh = new Planner(input);
          const moves = fresh.apply(change);
          const full = plan(changedInput, before);
          expect(fresh.result().assignment).toEqual(full.assignment);
          expect(moves).toEqual(full.moves);
        }
        expect(planner.apply({ type: 'health', cluster: input.clusters[0]!.name, health })).toEqual([]);
      }),
    );
  });

  it('one planner through a chain of changes, growing and shrinking, keeps giving what full plans give (property)', () => {
    // A long-lived planner reuses its work arrays between changes: what a larger problem left in them must not leak.
    const change = fc.oneof(
      fc.record({ type: fc.constant('add' as const), home: fc.nat(4) }),
      fc.record({ type: fc.constant('remove' as const), pick: fc.nat(8) }),
      fc.record({ type: fc.constant('objects' as const), pick: fc.nat(60), objects: fc.nat(5000) }),
    );
    fc.assert(
      fc.property(fleetArb(true), fc.array(change, { minLength: 1, maxLength: 8 }), (start, changes) => {
        const planner = new Planner(start);
        let input = start;
        let previous: Assignment = planner.result().assignment;
        let added = 0;
        for (const c of changes) {
          const list = shards(input);
          let step: Parameters<Planner['apply']>[0];
          if (c.type === 'add') {
            const shard = { name: `zz-${added++}`, homeCluster: input.clusters[c.home % input.clusters.length]!.name };
            step = { type: 'addShard', operator: 'ops/root', shard };
            input = withShards(input, [...list, shard]);
          } else if (c.type === 'remove') {
            if (list.length < 2) continue;
            const removed = list[c.pick % list.length]!;
            step = { type: 'removeShard', operator: 'ops/root', shard: removed.name };
            input = withShards(input, list.filter((s) => s !== removed));
          } else {
            const weight = input.weights[c.pick % Math.max(1, input.weights.length)];
            if (!weight) continue;
            step = { type: 'objects', cluster: weight.cluster, namespace: weight.namespace, objects: c.objects };
            input = withWeights(input, [
              ...input.weights.filter((w) => w.cluster !== weight.cluster || w.namespace !== weight.namespace),
              { cluster: weight.cluster, namespace: weight.namespace, objects: c.objects },
            ]);
          }
          const moves = planner.apply(step);
          const full = plan(input, previous);
          expect(planner.result().assignment).toEqual(full.assignment);
          expect(moves).toEqual(full.moves);
          previous = full.assignment;
        }
      }),
    );
  });
});
