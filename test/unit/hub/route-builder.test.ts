import { createServer as createNkey } from '@nats-io/nkeys';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { unitKey } from '../../../src/sharding/index.js';
import type { OperatorPlan, ShardPlan } from '../../../src/hub/plan.js';
import { buildRouteTable, sameRoutes, type BuildRouteTableOptions } from '../../../src/hub/route-builder.js';
import { ROUTE_TABLE_SCHEMA_VERSION, RouteTableKind, openRouteTable, routeSigner, type ClusterIdentity } from '../../../src/transport/index.js';

const BUCKETS = 8;
const NOW = new Date('2026-03-01T12:00:00.000Z');

const identity = (name: string): ClusterIdentity => ({
  name,
  labels: {},
  server: `https://${name}.example:6443`,
  caPem: `-----BEGIN CERTIFICATE-----\n${name}\n-----END CERTIFICATE-----\n`,
});
/** Registered clusters: `c` is planned but has not registered (no endpoint known). */
const REGISTERED = new Map(['a', 'b'].map((name) => [name, identity(name)]));

const operatorPlan = (shards: ShardPlan[] = []): OperatorPlan => ({
  operator: 'ns/op',
  hashAlgorithm: 'fnv-range',
  bucketCount: BUCKETS,
  labels: { hash: 'h', namespace: 'n', control: 'c' },
  clusters: ['b', 'a', 'c'],
  shards,
});
const shardPlan = (overrides: Partial<ShardPlan> = {}): ShardPlan => ({
  name: 'ns/op-0',
  homeCluster: 'b',
  limits: [{ relateResources: [{ apiGroups: [''], resources: ['configmaps'] }], selector: { matchLabels: { app: 'x' } } }],
  units: [],
  ...overrides,
});
function build(overrides: Partial<BuildRouteTableOptions> = {}) {
  const shard = shardPlan();
  return buildRouteTable({
    plan: operatorPlan([shard]),
    shard,
    shardName: shard.name,
    units: [],
    clusters: REGISTERED,
    version: 7,
    now: NOW,
    leaseSeconds: 30,
    ...overrides,
  });
}

const units = fc.uniqueArray(
  fc.record({ cluster: fc.constantFrom('a', 'b', 'c'), bucket: fc.integer({ min: 0, max: BUCKETS - 1 }) }).map((u) => unitKey(u.cluster, u.bucket)),
);

describe('buildRouteTable', () => {
  it('grants each unit in its own cluster\'s entry, buckets sorted, clusters in plan order, unregistered clusters left out', () => {
    fc.assert(
      fc.property(units, (granted) => {
        const table = build({ units: granted });
        expect(table.clusters.map((c) => c.name)).toEqual(['b', 'a']);
        for (const cluster of table.clusters) {
          const expected = granted
            .filter((u) => u.endsWith(`@${cluster.name}`))
            .map((u) => Number(u.split('@')[0]))
            .sort((x, y) => x - y);
          expect(cluster.buckets).toEqual(expected);
          expect(cluster.server).toBe(REGISTERED.get(cluster.name)?.server);
          expect(cluster.caPem).toBe(REGISTERED.get(cluster.name)?.caPem);
        }
      }),
    );
  });

  it('carries the plan\'s hashing, the shard\'s home, limits and lock name, and the version, time and lease given', () => {
    const shard = shardPlan({ leaderElectionName: 'op-leader', units: [unitKey('a', 3)] });
    const table = build({ plan: operatorPlan([shard]), shard, units: shard.units });
    expect(table).toEqual({
      schema: ROUTE_TABLE_SCHEMA_VERSION,
      operator: 'ns/op',
      shard: 'ns/op-0',
      version: 7,
      issuedAt: '2026-03-01T12:00:00.000Z',
      homeCluster: 'b',
      leaderElectionName: 'op-leader',
      hashAlgorithm: 'fnv-range',
      bucketCount: BUCKETS,
      labels: { hash: 'h', namespace: 'n', control: 'c' },
      leaseSeconds: 30,
      clusters: [
        { name: 'b', server: 'https://b.example:6443', caPem: REGISTERED.get('b')!.caPem, buckets: [], limits: shard.limits },
        { name: 'a', server: 'https://a.example:6443', caPem: REGISTERED.get('a')!.caPem, buckets: [3], limits: shard.limits },
      ],
    });
    expect('leaderElectionName' in build()).toBe(false);
  });

  it('gives a shard no longer planned no limits and keeps its previous home, else the plan\'s first cluster', () => {
    const withdrawn = build({ shard: undefined, shardName: 'ns/op-9', units: [unitKey('a', 1)], previousHome: 'a' });
    expect(withdrawn.homeCluster).toBe('a');
    expect(withdrawn.clusters.every((c) => c.limits.length === 0)).toBe(true);
    expect(withdrawn.clusters.find((c) => c.name === 'a')?.buckets).toEqual([1]);
    expect(build({ shard: undefined, shardName: 'ns/op-9' }).homeCluster).toBe('b');
    expect(build({ plan: { ...operatorPlan(), clusters: [] }, shard: undefined, shardName: 'ns/op-9' }).homeCluster).toBe('unknown');
  });

  it('builds tables a proxy accepts: signed, they open with the hub\'s key and no other, unchanged', () => {
    const signer = routeSigner(new TextDecoder().decode(createNkey().getSeed()));
    const stranger = routeSigner(new TextDecoder().decode(createNkey().getSeed()));
    fc.assert(
      fc.property(units, fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), (granted, version) => {
        const table = build({ units: granted, version });
        const opened = openRouteTable(signer.seal(RouteTableKind, table), [signer.publicKey]);
        expect(opened).toEqual({ ok: true, value: table });
        expect(openRouteTable(signer.seal(RouteTableKind, table), [stranger.publicKey]).ok).toBe(false);
      }),
      { numRuns: 30 },
    );
  });
});

describe('sameRoutes', () => {
  it('ignores the version and issue time, and nothing else', () => {
    fc.assert(
      fc.property(units, units, fc.integer({ min: 1, max: 1e12 }), fc.integer({ min: 0, max: 1e12 }), (first, second, version, ms) => {
        const a = build({ units: first });
        const b = build({ units: second, version, now: new Date(ms) });
        const registered = (list: string[]) => list.filter((u) => !u.endsWith('@c')).sort();
        expect(sameRoutes(a, b)).toBe(JSON.stringify(registered(first)) === JSON.stringify(registered(second)));
        expect(sameRoutes(a, build({ units: first, version, now: new Date(ms) }))).toBe(true);
      }),
    );
    expect(sameRoutes(build(), build({ leaseSeconds: 31 }))).toBe(false);
    expect(sameRoutes(build(), build({ shard: shardPlan({ homeCluster: 'a' }) }))).toBe(false);
    expect(sameRoutes(build(), build({ shard: shardPlan({ limits: [] }) }))).toBe(false);
  });
});

describe('buildRouteTable: how each cluster route selects objects', () => {
  const selections = (plan: Partial<OperatorPlan>): Record<string, unknown> => {
    const table = build({ plan: { ...operatorPlan([shardPlan()]), ...plan } });
    return Object.fromEntries(table.clusters.map((c) => [c.name, 'selection' in c ? c.selection : 'absent']));
  };

  it('leaves `selection` out where objects are labelled, so such tables are what they were', () => {
    expect(selections({})).toEqual({ b: 'absent', a: 'absent' });
    expect(selections({ objectLabels: 'Auto' })).toEqual({ b: 'absent', a: 'absent' });
    expect(selections({ objectLabels: 'Always', shardSelectorClusters: ['a', 'b'] })).toEqual({ b: 'absent', a: 'absent' });
  });

  it('selects by shard selector where the server offers it, else by label (Auto) or by the proxy (Never)', () => {
    expect(selections({ objectLabels: 'Auto', shardSelectorClusters: ['a'] })).toEqual({ b: 'absent', a: 'shardSelector' });
    expect(selections({ shardSelectorClusters: ['a'] })).toEqual({ b: 'absent', a: 'shardSelector' });
    expect(selections({ objectLabels: 'Never', shardSelectorClusters: ['a'] })).toEqual({ b: 'proxyFilter', a: 'shardSelector' });
  });

  it('never uses shard selectors for kusionstack buckets, which are no hash ranges', () => {
    expect(selections({ hashAlgorithm: 'kusionstack', shardSelectorClusters: ['a', 'b'] })).toEqual({ b: 'absent', a: 'absent' });
    expect(selections({ hashAlgorithm: 'kusionstack', objectLabels: 'Never', shardSelectorClusters: ['a'] })).toEqual({ b: 'proxyFilter', a: 'proxyFilter' });
  });

  it('makes a table differ when a cluster starts or stops offering shard selectors', () => {
    const shard = shardPlan();
    const before = build({ plan: operatorPlan([shard]), shard });
    const after = build({ plan: { ...operatorPlan([shard]), shardSelectorClusters: ['a'] }, shard });
    expect(sameRoutes(before, after)).toBe(false);
    expect(JSON.stringify(before)).toBe(JSON.stringify(build({ plan: { ...operatorPlan([shard]), objectLabels: 'Auto' }, shard })));
  });

  it('names the resources sharded by uid in every cluster route, and nothing when there are none', () => {
    const objectSharding = [{ apiGroups: [''], resources: ['configmaps'] }];
    const table = build({ plan: { ...operatorPlan([shardPlan()]), objectSharding } });
    expect(table.clusters.map((c) => c.objectSharding)).toEqual([objectSharding, objectSharding]);
    expect(build().clusters.every((c) => !('objectSharding' in c))).toBe(true);
  });
});
