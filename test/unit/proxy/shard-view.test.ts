import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ClusterShardView, LockRenamer, MeshObjects, shardLockName } from '../../../src/proxy/index.js';
import { SelectorSyntaxError } from '../../../src/errors.js';
import { bucketOf, createHashSettings, matches, parseSelector } from '../../../src/sharding/index.js';
import type { ClusterRoute, RouteTable } from '../../../src/transport/index.js';
import { clusterFixture, routeTableFixture } from './route-table-fixture.js';

const HASH = 'h';
const BUCKETS = 16;

function viewOf(buckets: number[], options: { fenced?: boolean; route?: Partial<ClusterRoute>; table?: Partial<RouteTable> } = {}): ClusterShardView {
  const table = routeTableFixture({
    hashAlgorithm: 'fnv',
    bucketCount: BUCKETS,
    clusters: [clusterFixture('a', buckets, options.route)],
    ...options.table,
  });
  return new ClusterShardView({ table, route: table.clusters[0]!, fenced: options.fenced ?? false });
}

const bucketSet = fc.uniqueArray(fc.integer({ min: 0, max: BUCKETS - 1 }), { maxLength: BUCKETS });
/** Labels an object may carry: a hash label (a bucket as the agent writes it, or garbage) and an `app` label. */
const labels = fc.record(
  {
    [HASH]: fc.oneof(fc.integer({ min: 0, max: BUCKETS + 2 }).map(String), fc.constantFrom('x', '-1', 'in')),
    app: fc.constantFrom('foo', 'bar', 'baz'),
  },
  { requiredKeys: [] },
);
/** Hash label values that are not a bucket's canonical decimal form, yet `Number()` reads as one. */
const nonCanonicalHash = fc.constantFrom('', ' ', '01', '1.0', '0x1', '1e0', ' 2');

describe('ClusterShardView', () => {
  it('injects a selector that matches exactly the objects of owned buckets, the same test watch events get', () => {
    fc.assert(
      fc.property(bucketSet, labels, (owned, objectLabels) => {
        const view = viewOf(owned);
        const selector = parseSelector(view.selectorFor('', 'configmaps'));
        const inOwnedBucket = objectLabels[HASH] !== undefined && owned.map(String).includes(objectLabels[HASH]);
        expect(matches(selector, objectLabels)).toBe(inOwnedBucket);
        expect(view.admits('', 'configmaps', { labels: objectLabels })).toBe(inOwnedBucket);
      }),
    );
  });

  // admits() once read the label with Number(), taking "" for bucket 0 and "01", "0x1" or "1e0" for bucket 1, which
  // the injected selector (string equality) matches none of.
  it('admits no hash label value the injected selector does not match (non-canonical forms)', () => {
    fc.assert(
      fc.property(nonCanonicalHash, (hash) => {
        const view = viewOf([0, 1, 2]);
        const objectLabels = { [HASH]: hash };
        expect(matches(parseSelector(view.selectorFor('', 'configmaps')), objectLabels)).toBe(false);
        expect(view.admits('', 'configmaps', { labels: objectLabels })).toBe(false);
      }),
    );
  });

  it('ANDs the limits naming a resource (by group and resource, `*` included) into its selector and its admission', () => {
    const view = viewOf([1, 2], {
      route: {
        limits: [
          { relateResources: [{ apiGroups: ['apps'], resources: ['deployments'] }], selector: { matchLabels: { app: 'foo' } } },
          { relateResources: [{ apiGroups: ['*'], resources: ['*'] }], selector: { matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['baz'] }] } },
        ],
      },
    });
    expect(view.limited('apps', 'deployments')).toBe(true);
    expect(view.limited('', 'nodes')).toBe(true);
    fc.assert(
      fc.property(labels, fc.constantFrom(['apps', 'deployments'], ['', 'deployments'], ['', 'configmaps']), (objectLabels, [group, resource]) => {
        const inShard = objectLabels[HASH] === '1' || objectLabels[HASH] === '2';
        const app = objectLabels.app;
        const wanted = inShard && app !== 'baz' && (group !== 'apps' || app === 'foo');
        expect(view.admits(group!, resource!, { labels: objectLabels })).toBe(wanted);
        expect(matches(parseSelector(view.selectorFor(group!, resource!)), objectLabels)).toBe(wanted);
      }),
    );
  });

  it('is limited only for the resources its limits name', () => {
    const view = viewOf([1], {
      route: { limits: [{ relateResources: [{ apiGroups: [''], resources: ['pods'] }], selector: { matchLabels: { app: 'foo' } } }] },
    });
    expect(view.limited('', 'pods')).toBe(true);
    expect(view.limited('apps', 'pods')).toBe(false);
    expect(view.limited('', 'nodes')).toBe(false);
    expect(view.selectorFor('', 'configmaps')).toBe(`${HASH}=1`);
    expect(view.selectorFor('', 'pods')).toBe(`app=foo,${HASH}=1`);
  });

  it('never weakens the client selector: what the merged selector matches, both the shard and the client match', () => {
    const clientSelector = fc.constantFrom('', ' ', 'app=foo', 'app!=foo', 'app in (foo,bar)', `${HASH}=3`, `${HASH} notin (1)`, `!${HASH}`, `${HASH},app`, 'app notin (foo)');
    fc.assert(
      fc.property(bucketSet, clientSelector, labels, (owned, client, objectLabels) => {
        const view = viewOf(owned);
        const merged = matches(parseSelector(view.selectorWith('', 'configmaps', client)), objectLabels);
        const shard = matches(parseSelector(view.selectorFor('', 'configmaps')), objectLabels);
        expect(merged).toBe(shard && matches(parseSelector(client), objectLabels));
      }),
    );
    const view = viewOf([3]);
    expect(view.selectorWith('', 'configmaps', undefined)).toBe(view.selectorFor('', 'configmaps'));
  });

  it('throws SelectorSyntaxError for a client selector it cannot parse, rather than appending it', () => {
    const view = viewOf([3]);
    for (const bad of ['app in (a', 'app in (a) , ', '!', 'app=x,,y=z']) {
      expect(() => view.selectorWith('', 'configmaps', bad), bad).toThrow(SelectorSyntaxError);
    }
  });

  it('owns nothing when fenced: a valid selector that matches nothing, no namespace, no event', () => {
    fc.assert(
      fc.property(bucketSet, labels, fc.string(), (owned, objectLabels, namespace) => {
        const view = viewOf(owned, { fenced: true });
        expect(view.ownsNothing).toBe(true);
        expect(view.owned.size).toBe(0);
        expect(matches(parseSelector(view.selectorFor('', 'configmaps')), objectLabels)).toBe(false);
        expect(view.admits('', 'configmaps', { labels: objectLabels })).toBe(false);
        expect(view.ownsNamespace(namespace)).toBe(false);
      }),
    );
    expect(viewOf([]).ownsNothing).toBe(true);
    expect(viewOf([0]).ownsNothing).toBe(false);
  });

  it('places a namespace in the bucket the table\'s hash settings give, and owns it exactly when it owns that bucket', () => {
    for (const algorithm of ['fnv', 'kusionstack'] as const) {
      const settings = createHashSettings({ algorithm, bucketCount: BUCKETS });
      fc.assert(
        fc.property(bucketSet, fc.string({ minLength: 1, maxLength: 63 }), (owned, namespace) => {
          const view = viewOf(owned, { table: { hashAlgorithm: algorithm } });
          const bucket = bucketOf(namespace, settings);
          expect(view.bucketOf(namespace)).toBe(bucket);
          expect(view.ownsNamespace(namespace)).toBe(owned.includes(bucket));
        }),
      );
    }
  });

  it('names the owner of a bucket it does not own from the table, and nobody for an unknown one', () => {
    const view = viewOf([1], { route: { bucketOwners: { '2': 's2', '3': 's3' } } });
    expect(view.ownerOf(2)).toBe('s2');
    expect(view.ownerOf(3)).toBe('s3');
    expect(view.ownerOf(4)).toBeUndefined();
    expect(viewOf([1]).ownerOf(2)).toBeUndefined();
    expect(view.name).toBe('a');
  });

  it('reads the hash label the table names, not a fixed one', () => {
    const view = viewOf([5], { table: { labels: { hash: 'example.com/bucket', namespace: 'n', control: 'c' } } });
    expect(view.admits('', 'configmaps', { labels: { 'example.com/bucket': '5' } })).toBe(true);
    expect(view.admits('', 'configmaps', { labels: { [HASH]: '5' } })).toBe(false);
    expect(matches(parseSelector(view.selectorFor('', 'configmaps')), { 'example.com/bucket': '5' })).toBe(true);
    expect(matches(parseSelector(view.selectorFor('', 'configmaps')), { [HASH]: '5' })).toBe(false);
  });
});

describe('ClusterShardView with the shard\'s locks', () => {
  const table = routeTableFixture({ hashAlgorithm: 'fnv', bucketCount: BUCKETS, clusters: [clusterFixture('a', Array.from({ length: BUCKETS }, (_, b) => b))] });
  const locks = new LockRenamer({ leaderElectionName: 'leader', shard: 'a/op-1-normal', namespace: 'op' });
  const view = new ClusterShardView({ table, route: table.clusters[0]!, fenced: false, hidden: new MeshObjects({ namespace: 'op', meshSecret: 'ctrlmesh-proxy', locks }) });
  const labelled = (namespace: string, name: string) => ({ namespace, name, labels: { [HASH]: String(bucketOf(namespace, createHashSettings({ algorithm: 'fnv', bucketCount: BUCKETS, labels: table.labels }))) } });

  it('reads every list and watch of Leases, and shows no shard\'s renamed lock, its own included', () => {
    {
      const judge = view.eventJudge('coordination.k8s.io', 'leases');
      expect(judge.mustJudge).toBe(true);
      expect(judge.echoSuffices).toBe(false);
      for (const shard of ['a/op-1-normal', 'a/op-2-normal']) {
        const lock = labelled('op', shardLockName('leader', shard));
        expect(judge.admits(lock)).toBe(false);
        expect(judge.owns(lock)).toBe(false);
      }
      // Anything else of the operator's namespace, and the same name elsewhere, is an ordinary object.
      expect(judge.admits(labelled('op', 'settings'))).toBe(true);
      expect(judge.admits(labelled('work', shardLockName('leader', 'a/op-2-normal')))).toBe(true);
    }
    // Other resources, ConfigMaps included (client-go's old locks), are judged as before: on a labelled cluster, their
    // lists pass unread. Secrets are read: the mesh's credential Secrets are hidden by name.
    for (const resource of ['configmaps', 'endpoints']) expect(view.eventJudge('', resource)).toMatchObject({ mustJudge: false, echoSuffices: true });
    const secrets = view.eventJudge('', 'secrets');
    expect(secrets).toMatchObject({ mustJudge: true, echoSuffices: false });
    expect(secrets.admits(labelled('op', 'ctrlmesh-proxy'))).toBe(false);
    expect(secrets.admits(labelled('op', 'ctrlmesh-proxy.a.op-2-normal'))).toBe(false);
    expect(secrets.admits(labelled('op', 'webhook-cert'))).toBe(true);
    expect(secrets.admits(labelled('work', 'ctrlmesh-proxy'))).toBe(true);
  });
});
