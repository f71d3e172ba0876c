import { createServer as createNkey } from '@nats-io/nkeys';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Fleet } from '../../../src/hub/fleet.js';
import { Buckets, Keys, MESSAGE_SCHEMA_VERSION, Messages, encodeMessage, publishRouteTable, routeSigner, type HandoverStateRecord, type RouteTable } from '../../../src/transport/index.js';
import { routeTableFixture } from '../proxy/route-table-fixture.js';
import { FakeKv } from './fake-kv.js';

const logger = pino({ level: 'silent' });
const signer = routeSigner(new TextDecoder().decode(createNkey().getSeed()));

function table(version: number): RouteTable {
  return routeTableFixture({ operator: 'ns/op', shard: 'a/s1', version, clusters: [] });
}

describe('Fleet: state that must not wedge the hub', () => {
  it('learns the revision of a malformed handover record, and forgets it once a valid one is read', () => {
    const fleet = new Fleet(logger, [signer.publicKey]);
    const state = new FakeKv();
    const key = Keys.handover('ns/op');
    void state.put(key, 'not json');
    fleet.applyStateEntry(state.entry(key));
    expect(fleet.corruptHandovers.get('ns/op')).toMatchObject({ key, revision: 1 });
    // Another operator's record under this key is no better.
    const other: HandoverStateRecord = { schema: MESSAGE_SCHEMA_VERSION, operator: 'ns/other', effective: {}, pending: [], history: [] };
    void state.put(key, encodeMessage(Messages.handoverState, other));
    fleet.applyStateEntry(state.entry(key));
    expect(fleet.corruptHandovers.get('ns/op')?.revision).toBe(2);
    expect(fleet.handovers.has('ns/op')).toBe(false);
    void state.put(key, encodeMessage(Messages.handoverState, { ...other, operator: 'ns/op' }));
    fleet.applyStateEntry(state.entry(key));
    expect(fleet.corruptHandovers.size).toBe(0);
    expect(fleet.handovers.get('ns/op')?.revision).toBe(3);
  });

  it('takes a greater version at a lower revision (its bucket was created again), never an older table', async () => {
    const fleet = new Fleet(logger, [signer.publicKey]);
    const routes = new FakeKv();
    const key = Keys.route('ns/op', 'a/s1');
    for (const v of [100, 101, 102]) await publishRouteTable(routes.asKv(), signer, table(v));
    fleet.applyRouteEntry(routes.entry(key));
    expect(fleet.routes.get('ns/op')?.get('a/s1')).toMatchObject({ revision: 3, table: { version: 102 } });
    routes.reset();
    await publishRouteTable(routes.asKv(), signer, table(50));
    fleet.applyRouteEntry(routes.entry(key));
    expect(fleet.routes.get('ns/op')?.get('a/s1')?.table.version).toBe(102);
    await publishRouteTable(routes.asKv(), signer, table(200));
    fleet.applyRouteEntry(routes.entry(key));
    expect(fleet.routes.get('ns/op')?.get('a/s1')).toMatchObject({ revision: 2, table: { version: 200 } });
  });

  it('forgets the revisions of a bucket created again, keeping what it knew', async () => {
    const fleet = new Fleet(logger, [signer.publicKey]);
    fleet.recordRoute(table(7), 12);
    fleet.recordHandover({ schema: 1, operator: 'ns/op', effective: {}, pending: [], history: [] }, 4);
    const state = new FakeKv();
    void state.put(Keys.handover('ns/x'), 'not json');
    fleet.applyStateEntry(state.entry(Keys.handover('ns/x')));
    expect(fleet.corruptHandovers.size).toBe(1);
    fleet.forgetRevisions(Buckets.routes);
    expect(fleet.routes.get('ns/op')?.get('a/s1')).toMatchObject({ revision: 0, table: { version: 7 } });
    expect(fleet.handovers.get('ns/op')?.revision).toBe(4);
    fleet.forgetRevisions(Buckets.state);
    expect(fleet.handovers.get('ns/op')?.revision).toBe(0);
    expect(fleet.corruptHandovers.size).toBe(0);
  });

  it('refuses an acknowledgement above the version published for its shard, and records one it cannot judge yet', () => {
    const fleet = new Fleet(logger, [signer.publicKey]);
    expect(fleet.recordAck('ns/op', 'a/s1', 1_000_000)).toBe(true);
    fleet.recordRoute(table(10), 1);
    expect(fleet.recordAck('ns/op', 'a/s1', 11)).toBe(false);
    expect(fleet.recordAck('ns/op', 'a/s2', 11)).toBe(true);
  });
});
