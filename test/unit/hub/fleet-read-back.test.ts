import { createServer as createNkey } from '@nats-io/nkeys';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Fleet } from '../../../src/hub/fleet.js';
import {
  Buckets,
  Keys,
  MESSAGE_SCHEMA_VERSION,
  Messages,
  RouteTableKind,
  encodeMessage,
  publishSealedRouteTable,
  routeSigner,
  type ClusterReport,
} from '../../../src/transport/index.js';
import { routeTableFixture } from '../proxy/route-table-fixture.js';
import { FakeKv } from './fake-kv.js';

const logger = pino({ level: 'silent' });
const signer = routeSigner(new TextDecoder().decode(createNkey().getSeed()));

function report(count: number): ClusterReport {
  return {
    schema: MESSAGE_SCHEMA_VERSION,
    cluster: 'a',
    sentAt: '2026-01-01T00:00:00.000Z',
    hash: { algorithm: 'fnv', bucketCount: 32, labels: { hash: 'h', namespace: 'n', control: 'c' } },
    shardingConfigs: [],
    circuitBreakers: [],
    faultInjections: [],
    pods: [],
    namespaces: [],
    objectCounts: [{ namespace: 'ns-a', resource: 'configmaps', count }],
  };
}

describe("Fleet: the leader's own writes read back", () => {
  it("holds the leader's own report (and older ones) when the state watch reads it back, not newer ones", async () => {
    const fleet = new Fleet(logger, []);
    const state = new FakeKv();
    const key = Keys.report('a');
    await state.put(key, encodeMessage(Messages.clusterReport, report(1)));
    const older = state.entry(key);
    const revision = await state.put(key, encodeMessage(Messages.clusterReport, report(2)));
    fleet.recordReport(report(2), revision);
    expect(fleet.holdsReport(state.entry(key))).toBe(true);
    expect(fleet.holdsReport(older)).toBe(true);
    // Another writer's later report is news.
    await state.put(key, encodeMessage(Messages.clusterReport, report(3)));
    expect(fleet.holdsReport(state.entry(key))).toBe(false);
    fleet.applyStateEntry(state.entry(key));
    expect(fleet.reports.get('a')?.objectCounts[0]?.count).toBe(3);
  });

  it('holds nothing once the state bucket was created again (revisions start over)', async () => {
    const fleet = new Fleet(logger, []);
    const state = new FakeKv();
    const key = Keys.report('a');
    fleet.recordReport(report(1), await state.put(key, encodeMessage(Messages.clusterReport, report(1))));
    state.reset();
    fleet.forgetRevisions(Buckets.state);
    await state.put(key, encodeMessage(Messages.clusterReport, report(2)));
    expect(fleet.holdsReport(state.entry(key))).toBe(false);
    expect(fleet.holdsReport({ ...state.entry(key), key: Keys.handover('ns/op') })).toBe(false);
  });

  it('learns the revision of its own table read back, and still verifies other bytes under the key', async () => {
    const fleet = new Fleet(logger, [signer.publicKey]);
    const routes = new FakeKv();
    const key = Keys.route('ns/op', 'a/s1');
    const table = routeTableFixture({ operator: 'ns/op', shard: 'a/s1', version: 5, clusters: [] });
    const sealed = signer.seal(RouteTableKind, table);
    await routes.put('other', 'x');
    fleet.recordRoute(table, await publishSealedRouteTable(routes.asKv(), table, sealed, 0), sealed);
    fleet.applyRouteEntry({ ...routes.entry(key), revision: 9 });
    expect(fleet.routes.get('ns/op')?.get('a/s1')).toMatchObject({ revision: 9, table: { version: 5 } });
    // One byte changed: read as any stored table, refused (the signature no longer matches), its revision learned.
    const tampered = Uint8Array.from(sealed);
    const at = tampered.length - 3;
    tampered[at] = (tampered[at] as number) ^ 1;
    fleet.applyRouteEntry({ ...routes.entry(key), value: tampered, revision: 10 });
    expect(fleet.routes.get('ns/op')?.get('a/s1')).toMatchObject({ revision: 10, table: { version: 5 } });
    // A newer table signed by the hub is taken.
    const newer = routeTableFixture({ operator: 'ns/op', shard: 'a/s1', version: 6, clusters: [] });
    fleet.applyRouteEntry({ ...routes.entry(key), value: signer.seal(RouteTableKind, newer), revision: 11 });
    expect(fleet.routes.get('ns/op')?.get('a/s1')).toMatchObject({ revision: 11, table: { version: 6 } });
  });

  it('knows its own table read back before the write was answered, by those bytes only', async () => {
    // It trusts no key: any table it had to verify would be refused.
    const fleet = new Fleet(logger, []);
    const routes = new FakeKv();
    const key = Keys.route('ns/op', 'a/s1');
    const table = routeTableFixture({ operator: 'ns/op', shard: 'a/s1', version: 5, clusters: [] });
    const sealed = signer.seal(RouteTableKind, table);
    const written = fleet.writingRoute(table, sealed);
    // Other bytes under the key meanwhile (another table, signed by the same key) are verified as any stored table.
    await routes.put(key, signer.seal(RouteTableKind, { ...table, version: 6 }));
    fleet.applyRouteEntry(routes.entry(key));
    expect(fleet.routes.get('ns/op')?.get('a/s1')).toBeUndefined();
    const revision = await routes.put(key, sealed);
    fleet.applyRouteEntry(routes.entry(key));
    expect(fleet.routes.get('ns/op')?.get('a/s1')).toMatchObject({ revision, table: { version: 5 } });
    // The answer then comes: the same table at the same revision.
    written();
    fleet.recordRoute(table, revision, sealed);
    expect(fleet.routes.get('ns/op')?.get('a/s1')).toMatchObject({ revision, table: { version: 5 } });
  });
});
