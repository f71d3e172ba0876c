import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { unitKey } from '../../../src/sharding/index.js';
import { Fleet } from '../../../src/hub/fleet.js';
import type { FleetPlan } from '../../../src/hub/plan.js';
import { reconcile as reconcilePass, type ReconcileContext } from '../../../src/hub/reconciler.js';
import { RevocationClock } from '../../../src/hub/revocation-clock.js';

/** The monotonic clock of these tests: the wall time of the pass (or the hub's later clock reading), never stepped. */
let monotonic = 0;
function reconcile(ctx: ReconcileContext, plan: FleetPlan, now: number): ReturnType<typeof reconcilePass> {
  monotonic = now;
  return reconcilePass(ctx, plan, now);
}
import { createHubMetrics, createRegistry } from '../../../src/metrics/index.js';
import { Buckets, Keys, Messages, decodeMessage, type BucketName } from '../../../src/transport/index.js';
import { FakeKv } from './fake-kv.js';
import { fleetWithClusterA } from './fleet-fixture.js';

const logger = pino({ level: 'silent' });
const OPERATOR = 'ns/op';
const u = (b: number): string => unitKey('a', b);

/** One operator of two hand-written shards on cluster `a`. */
function plan(s1: number[], s2: number[]): FleetPlan {
  const shard = (name: string, buckets: number[]) => ({ name, homeCluster: 'a', limits: [], units: buckets.map(u) });
  return {
    operators: [
      {
        operator: OPERATOR,
        hashAlgorithm: 'kusionstack',
        bucketCount: 8,
        labels: { hash: 'h', namespace: 'n', control: 'c' },
        clusters: ['a'],
        shards: [shard('a/s1', s1), shard('a/s2', s2)],
      },
    ],
    frozen: [],
  };
}

function setup(restored: () => BucketName[] = () => []) {
  const { fleet, signer } = fleetWithClusterA(logger);
  const routes = new FakeKv();
  const state = new FakeKv();
  const clusters = new FakeKv();
  const ctx: ReconcileContext = {
    fleet,
    routes: routes.asKv(),
    signer,
    state: state.asKv(),
    leaseSeconds: 10,
    grantMarginMs: 0,
    leaderSince: 0,
    clock: () => 0,
    monotonic: () => monotonic,
    revocations: new RevocationClock(),
    historyLimit: 10,
    logger,
    metrics: createHubMetrics(createRegistry('hub')),
    buckets: { restore: async () => restored(), clusters: clusters.asKv() },
  };
  const owners = (): Map<string, string[]> => {
    const out = new Map<string, string[]>();
    for (const { table } of fleet.routes.get(OPERATOR)?.values() ?? []) {
      for (const b of table.clusters.flatMap((c) => c.buckets)) out.set(u(b), [...(out.get(u(b)) ?? []), table.shard]);
    }
    return out;
  };
  const versions = (): Record<string, number> => Object.fromEntries([...(fleet.routes.get(OPERATOR)?.values() ?? [])].map((r) => [r.table.shard, r.table.version]));
  return { fleet, routes, state, clusters, ctx, owners, versions };
}

describe('reconcile: bad state never wedges', () => {
  it('publishes versions from the clock', async () => {
    const { ctx, versions } = setup();
    const result = await reconcile(ctx, plan([0, 1], [2]), 1_700_000_000_000);
    expect(versions()).toEqual({ 'a/s1': 1_700_000_000_000, 'a/s2': 1_700_000_000_000 });
    expect(result).toMatchObject({ failed: false });
    expect(result.nextDeadline).toBeUndefined();
  });

  it('a write refused (its bucket created again by another process) fails the pass, which retries within a second', async () => {
    const { ctx, fleet, routes } = setup();
    await reconcile(ctx, plan([0, 1], [2]), 1_000_000);
    serving(fleet);
    routes.reset();
    await routes.put('elsewhere', 'x');
    await routes.put('elsewhere', 'y');
    // s2's table is at revision 2 in the old stream and the new one holds another key there: compare-and-set refused.
    const result = await reconcile(ctx, plan([0], [1, 2]), 1_000_100);
    expect(result.failed).toBe(true);
    expect(result.nextDeadline).toBeLessThanOrEqual(1_000_100 + 1_000);
  });

  it('quarantines a malformed handover record, replaces it over its revision and recovers the operator', async () => {
    const { ctx, fleet, state, owners } = setup();
    let now = 1_000_000;
    await reconcile(ctx, plan([0, 1], [2]), now);
    serving(fleet);
    const key = Keys.handover(OPERATOR);
    await state.put(key, '{"schema": 1, "operator": "ns/op", "effective": {"a/s1": [');
    expect(fleet.applyStateEntry(state.entry(key))).toBeUndefined();
    expect(fleet.handovers.has(OPERATOR)).toBe(false);
    expect(fleet.corruptHandovers.get(OPERATOR)?.revision).toBe(state.entry(key).revision);

    // Unit 1 moves to s2 meanwhile: revoked from s1 first, never in both tables.
    now += 1_000;
    await reconcile(ctx, plan([0], [1, 2]), now);
    const quarantined = state.values.get(Keys.quarantine(key, 2));
    expect(new TextDecoder().decode(quarantined?.value)).toContain('"effective": {"a/s1": [');
    const stored = decodeMessage(Messages.handoverState, state.values.get(key)?.value ?? new Uint8Array());
    expect(stored.ok).toBe(true);
    expect(fleet.corruptHandovers.size).toBe(0);
    for (const [unit, shards] of owners()) expect(shards, unit).toHaveLength(1);
    expect(owners().get(u(1))).toBeUndefined();

    // The stored record is the one the hub reads back; the next passes update it at its revision.
    fleet.applyStateEntry(state.entry(key));
    now += 10_001;
    await reconcile(ctx, plan([0], [1, 2]), now);
    expect(Object.fromEntries([...owners()].map(([unit, shards]) => [unit, shards]))).toEqual({ [u(0)]: ['a/s1'], [u(1)]: ['a/s2'], [u(2)]: ['a/s2'] });
  });

  it('a bucket created again: forgets its revisions and writes everything back, at versions above the old ones', async () => {
    let restored: BucketName[] = [];
    const { ctx, fleet, routes, state, clusters, versions } = setup(() => restored);
    await reconcile(ctx, plan([0, 1], [2]), 5_000_000);
    const before = versions();
    const revisionsBefore = routes.values.size;
    expect(revisionsBefore).toBe(2);

    routes.reset();
    state.reset();
    restored = [Buckets.routes, Buckets.state, Buckets.clusters];
    // Nothing changed in the plan: the pass still writes the tables, the handover record and the registry back.
    const result = await reconcile(ctx, plan([0, 1], [2]), 5_000_010);
    expect(result.published.map((t) => t.shard).sort()).toEqual(['a/s1', 'a/s2']);
    for (const [shard, version] of Object.entries(versions())) expect(version).toBeGreaterThan(before[shard] ?? Infinity);
    expect(state.values.has(Keys.handover(OPERATOR))).toBe(true);
    expect(clusters.values.has(Keys.cluster('a'))).toBe(true);

    restored = [];
    // Back to normal: nothing to write.
    expect((await reconcile(ctx, plan([0, 1], [2]), 5_000_020)).published).toEqual([]);
    expect(fleet.routes.get(OPERATOR)?.get('a/s1')?.revision).toBeGreaterThan(0);
  });

  it('judges acknowledgements against the published version: one above it grants nothing', async () => {
    const { ctx, fleet, routes, state } = setup();
    let now = 1_000_000;
    await reconcile(ctx, plan([0, 1], [2]), now);
    serving(fleet);
    now += 1_000;
    await reconcile(ctx, plan([0], [1, 2]), now);
    const revoking = fleet.handovers.get(OPERATOR)?.record.pending[0];
    expect(revoking).toMatchObject({ unit: u(1), from: 'a/s1', revokeVersion: now });
    expect(fleet.routes.get(OPERATOR)?.get('a/s1')?.table.version).toBe(revoking?.revokeVersion);
    // A forged or stale ack from the future is refused at the door...
    expect(fleet.recordAck(OPERATOR, 'a/s1', now + 1)).toBe(false);
    // ... and one stored earlier, read back before the tables (by a hub started now), is ignored when used.
    const restarted = new Fleet(logger, [ctx.signer.publicKey]);
    for (const record of fleet.clusters.values()) restarted.recordRegistration(record);
    expect(restarted.recordAck(OPERATOR, 'a/s1', now + 1)).toBe(true);
    for (const key of routes.values.keys()) restarted.applyRouteEntry(routes.entry(key));
    for (const key of state.values.keys()) restarted.applyStateEntry(state.entry(key));
    await reconcile({ ...ctx, fleet: restarted }, plan([0], [1, 2]), now + 10);
    expect(restarted.handovers.get(OPERATOR)?.record.pending).toHaveLength(1);
    // The genuine ack of the revoking table grants.
    expect(fleet.recordAck(OPERATOR, 'a/s1', now)).toBe(true);
    await reconcile(ctx, plan([0], [1, 2]), now + 20);
    expect(fleet.handovers.get(OPERATOR)?.record.history.at(-1)).toMatchObject({ unit: u(1), grantedBy: 'ack' });
  });
});

/** s2's proxy acknowledges its table: it serves, so units may move to it (handover.ts). */
function serving(fleet: Fleet): void {
  fleet.recordAck(OPERATOR, 'a/s2', fleet.routes.get(OPERATOR)!.get('a/s2')!.table.version);
}
