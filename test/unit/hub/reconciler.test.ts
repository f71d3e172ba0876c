import fc from 'fast-check';
import { pino } from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { unitKey } from '../../../src/sharding/index.js';
import type { FleetPlan, OperatorPlan } from '../../../src/hub/plan.js';
import { reconcile as reconcilePass, type ReconcileContext } from '../../../src/hub/reconciler.js';
import { RevocationClock } from '../../../src/hub/revocation-clock.js';

/** The monotonic clock of these tests: the wall time of the pass (or the hub's later clock reading), never stepped. */
let monotonic = 0;
function reconcile(ctx: ReconcileContext, plan: FleetPlan, now: number): ReturnType<typeof reconcilePass> {
  monotonic = now;
  return reconcilePass(ctx, plan, now);
}
import { createHubMetrics, createRegistry } from '../../../src/metrics/index.js';
import { Keys, Messages, decodeMessage, encodeToken, openRouteTable, type RouteTable } from '../../../src/transport/index.js';
import { FakeKv } from './fake-kv.js';
import { fleetWithClusterA } from './fleet-fixture.js';

const logger = pino({ level: 'silent' });
const LEASE_SECONDS = 10;
const MARGIN_MS = 500;
const T0 = 1_700_000_000_000;
const u = (bucket: number, cluster = 'a'): string => unitKey(cluster, bucket);

/** One operator whose shards own the given buckets of cluster `a` (and cluster `b`, which never registered). */
function operator(name: string, shards: Record<string, number[]>): OperatorPlan {
  return {
    operator: name,
    hashAlgorithm: 'fnv-range',
    bucketCount: 8,
    labels: { hash: 'h', namespace: 'n', control: 'c' },
    clusters: ['a', 'b'],
    shards: Object.entries(shards).map(([shard, buckets]) => ({ name: shard, homeCluster: 'a', limits: [], units: buckets.map((b) => u(b)) })),
  };
}
const fleetPlan = (operators: OperatorPlan[], frozen: string[] = []): FleetPlan => ({ operators, frozen });

/**
 * A KV that refuses every write of one operator's route tables, or of one key (a NATS error mid-pass); with a gate,
 * each write waits for it, counting the writes under way.
 */
class FailingRoutes extends FakeKv {
  failing: string | undefined;
  failingKey: string | undefined;
  gate: Promise<void> | undefined;
  inFlight = 0;
  override async create(key: string, value: Uint8Array | string): Promise<number> {
    await this.pass(key);
    return super.create(key, value);
  }
  override async update(key: string, value: Uint8Array | string, revision: number): Promise<number> {
    await this.pass(key);
    return super.update(key, value, revision);
  }
  private async pass(key: string): Promise<void> {
    this.inFlight += 1;
    try {
      await this.gate;
    } finally {
      this.inFlight -= 1;
    }
    if (this.failing !== undefined && key.startsWith(`${encodeToken(this.failing)}.`)) throw new Error('NATS timeout');
    if (key === this.failingKey) throw new Error('NATS timeout');
  }
}

function setup(options: { leaderSince?: number; clock?: () => number; monotonic?: () => number } = {}) {
  const { fleet, signer } = fleetWithClusterA(logger);
  const routes = new FailingRoutes();
  const state = new FakeKv();
  const ctx: ReconcileContext = {
    fleet,
    routes: routes.asKv(),
    signer,
    state: state.asKv(),
    leaseSeconds: LEASE_SECONDS,
    grantMarginMs: MARGIN_MS,
    leaderSince: options.leaderSince ?? 0,
    clock: options.clock ?? (() => 0),
    monotonic: options.monotonic ?? (() => Math.max(monotonic, (options.clock ?? (() => 0))())),
    revocations: new RevocationClock(),
    historyLimit: 10,
    logger,
    metrics: createHubMetrics(createRegistry('hub')),
  };
  /** The tables as stored in the routes bucket, each opened with the hub's public key (as a proxy does). */
  const stored = (): RouteTable[] =>
    [...routes.values.values()].map(({ value }) => {
      const opened = openRouteTable(value, [signer.publicKey]);
      if (!opened.ok) throw new Error(opened.reason);
      return opened.value;
    });
  /** Which shards the stored tables grant each unit to. */
  const owners = (): Map<string, string[]> => {
    const out = new Map<string, string[]>();
    for (const table of stored()) {
      for (const cluster of table.clusters) {
        for (const b of cluster.buckets) out.set(`${table.operator} ${u(b, cluster.name)}`, [...(out.get(`${table.operator} ${u(b, cluster.name)}`) ?? []), table.shard]);
      }
    }
    return out;
  };
  const table = (op: string, shard: string): RouteTable | undefined => stored().find((t) => t.operator === op && t.shard === shard);
  return { fleet, routes, state, ctx, signer, stored, owners, table };
}

describe('reconcile', () => {
  it('publishes one signed table per shard, versioned from the clock, granting the planned units of registered clusters', async () => {
    const { ctx, routes, stored, table } = setup();
    const result = await reconcile(ctx, fleetPlan([operator('ns/op', { s1: [0, 1], s2: [2] })]), T0);
    expect(result.published.map((t) => t.shard)).toEqual(['s1', 's2']);
    expect(result.nextDeadline).toBeUndefined();
    // What is stored is what was published, signed by the hub's key.
    expect(stored().sort((x, y) => x.shard.localeCompare(y.shard))).toEqual(result.published);
    expect(routes.values.has(Keys.route('ns/op', 's1'))).toBe(true);
    const s1 = table('ns/op', 's1')!;
    expect(s1).toMatchObject({ version: T0, issuedAt: new Date(T0).toISOString(), leaseSeconds: LEASE_SECONDS, homeCluster: 'a' });
    // Cluster b is planned but never registered: no endpoint, no entry.
    expect(s1.clusters).toEqual([expect.objectContaining({ name: 'a', buckets: [0, 1] })]);
    expect(table('ns/op', 's2')?.clusters[0]?.buckets).toEqual([2]);
  });

  it('republishes nothing while nothing changes, and keeps versions rising when the clock steps back', async () => {
    const { ctx, table } = setup();
    const plan = fleetPlan([operator('ns/op', { s1: [0, 1], s2: [2] })]);
    await reconcile(ctx, plan, T0);
    expect((await reconcile(ctx, plan, T0 + 5_000)).published).toEqual([]);
    expect(table('ns/op', 's1')?.version).toBe(T0);

    // The clock went back an hour; a change must still reach the proxies, which apply only greater versions.
    const moved = await reconcile(ctx, fleetPlan([operator('ns/op', { s1: [0, 1, 3], s2: [2] })]), T0 - 3_600_000);
    expect(moved.published.map((t) => t.shard)).toEqual(['s1']);
    expect(table('ns/op', 's1')?.version).toBe(T0 + 1);
    expect(table('ns/op', 's1')?.clusters[0]?.buckets).toEqual([0, 1, 3]);
  });

  it("publishes new versions when only a cluster's shard selectors change, moving no unit", async () => {
    const { ctx, table } = setup();
    const plain = operator('ns/op', { s1: [0, 1], s2: [2] });
    await reconcile(ctx, fleetPlan([plain]), T0);
    const filtering = await reconcile(ctx, fleetPlan([{ ...plain, shardSelectorClusters: ['a'] }]), T0 + 1_000);
    expect(filtering.published.map((t) => t.shard)).toEqual(['s1', 's2']);
    expect(table('ns/op', 's1')).toMatchObject({ version: T0 + 1_000, clusters: [{ name: 'a', buckets: [0, 1], selection: 'shardSelector' }] });
    expect((await reconcile(ctx, fleetPlan([{ ...plain, shardSelectorClusters: ['a'] }]), T0 + 2_000)).published).toEqual([]);
    // Back to labels: `selection` is gone again.
    await reconcile(ctx, fleetPlan([plain]), T0 + 3_000);
    expect(table('ns/op', 's1')?.clusters[0]).not.toHaveProperty('selection');
  });

  it('moves a unit by revoking it first, then granting it once the old owner acknowledges', async () => {
    const bed = setup();
    const { ctx, fleet, table, owners } = bed;
    await reconcile(ctx, fleetPlan([operator('ns/op', { s1: [0, 1], s2: [2] })]), T0);
    serve(bed, 'ns/op', 's2');
    const now = T0 + 1_000;
    const revoke = await reconcile(ctx, fleetPlan([operator('ns/op', { s1: [0], s2: [1, 2] })]), now);
    expect(revoke.published.map((t) => t.shard)).toEqual(['s1']);
    expect(owners().get(`ns/op ${u(1)}`)).toBeUndefined();
    expect(revoke.nextDeadline).toBe(now + LEASE_SECONDS * 1000 + MARGIN_MS);

    // No acknowledgement yet: nothing is granted however often the pass runs.
    expect((await reconcile(ctx, fleetPlan([operator('ns/op', { s1: [0], s2: [1, 2] })]), now + 10)).published).toEqual([]);
    expect(fleet.recordAck('ns/op', 's1', table('ns/op', 's1')!.version)).toBe(true);
    const grant = await reconcile(ctx, fleetPlan([operator('ns/op', { s1: [0], s2: [1, 2] })]), now + 20);
    expect(grant.published.map((t) => t.shard)).toEqual(['s2']);
    expect(grant.nextDeadline).toBeUndefined();
    expect(owners().get(`ns/op ${u(1)}`)).toEqual(['s2']);
    expect(fleet.handovers.get('ns/op')?.record.history.at(-1)).toMatchObject({ unit: u(1), from: 's1', to: 's2', grantedBy: 'ack' });
  });

  it('grants a revoked unit without acknowledgement only after the lease and margin, counted from when its table was recorded', async () => {
    // Recording the revoking table took 300 ms on the hub's clock.
    const bed = setup({ clock: () => T0 + 1_300 });
    const { ctx, fleet, owners, state } = bed;
    const plan = fleetPlan([operator('ns/op', { s1: [0], s2: [1, 2] })]);
    await reconcile(ctx, fleetPlan([operator('ns/op', { s1: [0, 1], s2: [2] })]), T0);
    serve(bed, 'ns/op', 's2');
    const revoke = await reconcile(ctx, plan, T0 + 1_000);
    const grantAt = T0 + 1_300 + LEASE_SECONDS * 1000 + MARGIN_MS;
    expect(revoke.nextDeadline).toBe(grantAt);
    const stored = decodeMessage(Messages.handoverState, state.values.get(Keys.handover('ns/op'))!.value);
    expect(stored.ok && stored.value.pending).toEqual([expect.objectContaining({ unit: u(1), from: 's1', to: 's2', revokedAt: T0 + 1_300 })]);

    expect((await reconcile(ctx, plan, grantAt - 1)).published).toEqual([]);
    expect(owners().get(`ns/op ${u(1)}`)).toBeUndefined();
    expect((await reconcile(ctx, plan, grantAt)).published.map((t) => t.shard)).toEqual(['s2']);
    expect(owners().get(`ns/op ${u(1)}`)).toEqual(['s2']);
    expect(fleet.handovers.get('ns/op')?.record.history.at(-1)).toMatchObject({ unit: u(1), grantedBy: 'lease-expiry' });
  });

  it('grants by expiry on the monotonic clock: a wall clock stepped forward an hour after the revocation grants nothing early', async () => {
    let mono = 0;
    const bed = setup({ monotonic: () => mono });
    const { ctx, owners } = bed;
    await reconcilePass(ctx, fleetPlan([operator('ns/op', { s1: [0, 1], s2: [] })]), T0);
    serve(bed, 'ns/op', 's2');
    const plan = fleetPlan([operator('ns/op', { s1: [0], s2: [1] })]);
    mono = 1_000;
    const revoke = await reconcilePass(ctx, plan, T0 + 1_000);
    expect(revoke.nextDeadline).toBe(1_000 + LEASE_SECONDS * 1000 + MARGIN_MS);
    mono = 1_001;
    await reconcilePass(ctx, plan, T0 + 3_600_000);
    expect(owners().get(`ns/op ${u(1)}`)).toBeUndefined();
    mono = 1_000 + LEASE_SECONDS * 1000 + MARGIN_MS - 1;
    await reconcilePass(ctx, plan, T0 + 3_600_000 + LEASE_SECONDS * 1000);
    expect(owners().get(`ns/op ${u(1)}`)).toBeUndefined();
    // Stepped back below the revocation's wall time, the grant still comes when the monotonic lease + margin is over.
    mono = 1_000 + LEASE_SECONDS * 1000 + MARGIN_MS;
    await reconcilePass(ctx, plan, T0 - 3_600_000);
    expect(owners().get(`ns/op ${u(1)}`)).toEqual(['s2']);
  });

  it('counts lease expiry from no earlier than when this hub became leader', async () => {
    const leaderSince = T0 + 60_000;
    const bed = setup({ leaderSince });
    const { ctx, owners } = bed;
    await reconcile(ctx, fleetPlan([operator('ns/op', { s1: [0, 1], s2: [] })]), T0);
    serve(bed, 'ns/op', 's2');
    const plan = fleetPlan([operator('ns/op', { s1: [0], s2: [1] })]);
    const revoke = await reconcile(ctx, plan, T0 + 1_000);
    expect(revoke.nextDeadline).toBe(leaderSince + LEASE_SECONDS * 1000 + MARGIN_MS);
    await reconcile(ctx, plan, T0 + 1_000 + LEASE_SECONDS * 1000 + MARGIN_MS);
    expect(owners().get(`ns/op ${u(1)}`)).toBeUndefined();
    await reconcile(ctx, plan, leaderSince + LEASE_SECONDS * 1000 + MARGIN_MS);
    expect(owners().get(`ns/op ${u(1)}`)).toEqual(['s2']);
  });

  it('withdraws every unit of an operator no longer planned, keeping its tables published; leaves a frozen one alone', async () => {
    const { ctx, table } = setup();
    await reconcile(ctx, fleetPlan([operator('ns/gone', { s1: [0, 1] }), operator('ns/frozen', { s1: [2] })]), T0);

    const result = await reconcile(ctx, fleetPlan([operator('ns/frozen', { s1: [3] })], ['ns/frozen']), T0 + 1_000);
    expect(result.published.map((t) => `${t.operator} ${t.shard}`)).toEqual(['ns/gone s1']);
    expect(table('ns/gone', 's1')).toMatchObject({ version: T0 + 1_000, homeCluster: 'a' });
    expect(table('ns/gone', 's1')?.clusters.flatMap((c) => c.buckets)).toEqual([]);
    // Frozen: the invalid config's table stays exactly as it was.
    expect(table('ns/frozen', 's1')).toMatchObject({ version: T0 });
    expect(table('ns/frozen', 's1')?.clusters[0]?.buckets).toEqual([2]);
  });

  it('keeps serving the other operators when one operator\'s tables cannot be written, and retries within a second', async () => {
    const { ctx, routes, table } = setup();
    routes.failing = 'ns/broken';
    const result = await reconcile(ctx, fleetPlan([operator('ns/broken', { s1: [0] }), operator('ns/ok', { s1: [1] })]), T0);
    expect(result.published.map((t) => t.operator)).toEqual(['ns/ok']);
    expect(result.nextDeadline).toBe(T0 + 1_000);
    expect(table('ns/broken', 's1')).toBeUndefined();
    routes.failing = undefined;
    const retried = await reconcile(ctx, fleetPlan([operator('ns/broken', { s1: [0] }), operator('ns/ok', { s1: [1] })]), T0 + 1_000);
    expect(retried.published.map((t) => t.operator)).toEqual(['ns/broken']);
  });

  it('writes the tables of every operator at once, and each handover record only after its tables', async () => {
    const { ctx, routes, state } = setup();
    let open!: () => void;
    routes.gate = new Promise((resolve) => (open = resolve));
    const plan = fleetPlan([operator('ns/one', { s1: [0], s2: [1], s3: [2] }), operator('ns/two', { s1: [3], s2: [4] })]);
    const pass = reconcile(ctx, plan, T0);
    await vi.waitFor(() => expect(routes.inFlight).toBe(5));
    expect(state.values.size).toBe(0);
    open();
    const result = await pass;
    expect(result.published.map((t) => `${t.operator} ${t.shard}`)).toEqual(['ns/one s1', 'ns/one s2', 'ns/one s3', 'ns/two s1', 'ns/two s2']);
    expect([...state.values.keys()].sort()).toEqual([Keys.handover('ns/one'), Keys.handover('ns/two')].sort());
  });

  it("records every table written when one of an operator's writes fails, writes no handover record for it, and retries", async () => {
    const { ctx, fleet, routes, state, table, owners } = setup();
    routes.failingKey = Keys.route('ns/op', 's2');
    const plan = fleetPlan([operator('ns/op', { s1: [0], s2: [1], s3: [2] }), operator('ns/ok', { s1: [3] })]);
    const result = await reconcile(ctx, plan, T0);
    expect(result.published.map((t) => `${t.operator} ${t.shard}`)).toEqual(['ns/ok s1']);
    expect(result.nextDeadline).toBe(T0 + 1_000);
    // The writes that succeeded are known, so the retry compares-and-sets over them.
    expect([...(fleet.routes.get('ns/op')?.keys() ?? [])].sort()).toEqual(['s1', 's3']);
    expect(table('ns/op', 's2')).toBeUndefined();
    expect(state.values.has(Keys.handover('ns/op'))).toBe(false);
    expect(fleet.handovers.has('ns/op')).toBe(false);
    expect(state.values.has(Keys.handover('ns/ok'))).toBe(true);

    routes.failingKey = undefined;
    const retried = await reconcile(ctx, plan, T0 + 1_000);
    expect(retried.published.map((t) => `${t.operator} ${t.shard}`)).toContain('ns/op s2');
    expect(state.values.has(Keys.handover('ns/op'))).toBe(true);
    // Rebuilt from the tables written (no record was): bucket 1 waits for the proxies as after any lost record.
    expect(owners().get(`ns/op ${u(0)}`)).toEqual(['s1']);
    expect(owners().get(`ns/op ${u(2)}`)).toEqual(['s3']);
    expect(fleet.handovers.get('ns/op')?.record.pending.map((p) => p.unit)).toEqual([u(1)]);
  });

  it('keeps a revocation out of the handover record until every table of its step is written', async () => {
    const bed = setup();
    const { ctx, fleet, routes, owners } = bed;
    await reconcile(ctx, fleetPlan([operator('ns/op', { s1: [0, 1], s2: [2], s3: [3] })]), T0);
    serve(bed, 'ns/op', 's2', 's3');
    const before = fleet.handovers.get('ns/op')?.record;
    routes.failingKey = Keys.route('ns/op', 's3');
    // s1 gives up bucket 1 (to s2) and s3 changes too; s3's write fails.
    const plan = fleetPlan([operator('ns/op', { s1: [0], s2: [1, 2], s3: [3, 4] })]);
    const failed = await reconcile(ctx, plan, T0 + 1_000);
    expect(failed.nextDeadline).toBe(T0 + 2_000);
    expect(owners().get(`ns/op ${u(1)}`)).toBeUndefined();
    expect(fleet.handovers.get('ns/op')?.record).toEqual(before);

    routes.failingKey = undefined;
    await reconcile(ctx, plan, T0 + 2_000);
    expect(fleet.handovers.get('ns/op')?.record.pending).toEqual([expect.objectContaining({ unit: u(1), from: 's1', to: 's2' })]);
    expect(owners().get(`ns/op ${u(4)}`)).toEqual(['s3']);
  });

  it('never grants a unit to two shards at once, whatever the sequence of plans, acknowledgements and times', async () => {
    const shards = ['s1', 's2', 's3'];
    const step = fc.record({
      // Each bucket 0..5 planned to one shard, or to none.
      assignment: fc.array(fc.integer({ min: -1, max: shards.length - 1 }), { minLength: 6, maxLength: 6 }),
      advanceMs: fc.constantFrom(0, 1, 1_000, LEASE_SECONDS * 1000, LEASE_SECONDS * 1000 + MARGIN_MS + 1),
      acks: fc.subarray(shards),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 12 }), async (steps) => {
        const { ctx, fleet, owners, table } = setup();
        let now = T0;
        const settle = fleetPlan([operator('ns/op', Object.fromEntries(shards.map((s) => [s, []])))]);
        let last: FleetPlan = settle;
        for (const { assignment, advanceMs, acks } of steps) {
          now += advanceMs;
          for (const shard of acks) {
            const version = table('ns/op', shard)?.version;
            if (version !== undefined) fleet.recordAck('ns/op', shard, version);
          }
          const planned: Record<string, number[]> = Object.fromEntries(shards.map((s) => [s, []]));
          assignment.forEach((shard, bucket) => {
            if (shard >= 0) planned[shards[shard]!]!.push(bucket);
          });
          last = fleetPlan([operator('ns/op', planned)]);
          await reconcile(ctx, last, now);
          for (const [unit, holders] of owners()) expect(holders, unit).toHaveLength(1);
        }
        // With acknowledgements (or enough time), the tables converge on the last plan.
        for (let i = 0; i < 3; i += 1) {
          now += LEASE_SECONDS * 1000 + MARGIN_MS + 1;
          for (const shard of shards) {
            const version = table('ns/op', shard)?.version;
            if (version !== undefined) fleet.recordAck('ns/op', shard, version);
          }
          await reconcile(ctx, last, now);
        }
        const wanted = new Map(last.operators[0]!.shards.flatMap((s) => s.units.map((unit) => [`ns/op ${unit}`, [s.name]] as const)));
        expect(owners()).toEqual(wanted);
      }),
      { numRuns: 40 },
    );
  });
});

/** The shards' proxies acknowledge their current tables: they serve, so units may move to them (handover.ts). */
function serve(bed: ReturnType<typeof setup>, op: string, ...shards: string[]): void {
  for (const shard of shards) bed.fleet.recordAck(op, shard, bed.table(op, shard)!.version);
}
