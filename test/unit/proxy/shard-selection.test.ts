import fc from 'fast-check';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { UnjudgedListError } from '../../../src/errors.js';
import { ClusterShardView } from '../../../src/proxy/index.js';
import { echoedSelector, filterListBody, judgeList } from '../../../src/proxy/request/answer/list-filter.js';
import { bucketOf, createHashSettings, matches, namespaceHash, parseSelector } from '../../../src/sharding/index.js';
import type { ClusterRoute } from '../../../src/transport/index.js';
import { clusterFixture, routeTableFixture, markContinue } from './route-table-fixture.js';
import { drain } from './drain.js';

const BUCKETS = 32;
const settings = createHashSettings({ algorithm: 'fnv-range', bucketCount: BUCKETS, labels: { hash: 'h', namespace: 'n', control: 'c' } });

function viewOf(buckets: number[], route: Partial<ClusterRoute>, algorithm: 'fnv-range' | 'kusionstack' = 'fnv-range'): ClusterShardView {
  const table = routeTableFixture({ hashAlgorithm: algorithm, bucketCount: BUCKETS, clusters: [clusterFixture('a', buckets, route)] });
  return new ClusterShardView({ table, route: table.clusters[0]!, fenced: false });
}

/** The API server's test (apimachinery pkg/sharding): the hash of the namespace inside one `[start, end)` term. */
function serverKeeps(shardSelector: string, namespace: string): boolean {
  const h = namespaceHash(namespace);
  return [...shardSelector.matchAll(/shardRange\(object\.metadata\.namespace, '(0x[0-9a-f]+)', '(0x[0-9a-f]+)'\)/g)].some(
    ([, start, end]) => BigInt(start!) <= h && h < BigInt(end!),
  );
}

const namespaces = fc.stringMatching(/^[a-z][a-z0-9-]{0,20}$/);
const bucketSet = fc.uniqueArray(fc.integer({ min: 0, max: BUCKETS - 1 }), { maxLength: BUCKETS });
/** Limits as KusionStack's auto-sharding writes them (hash and namespace In/NotIn) and a label of the user's own. */
const limit = fc.record({
  hashIn: fc.option(fc.uniqueArray(fc.integer({ min: 0, max: BUCKETS - 1 }).map(String), { minLength: 1, maxLength: 8 })),
  namespaceNotIn: fc.option(fc.uniqueArray(namespaces, { minLength: 1, maxLength: 3 })),
  namespaceIn: fc.option(fc.uniqueArray(namespaces, { minLength: 1, maxLength: 3 })),
  app: fc.option(fc.constantFrom('foo', 'bar')),
});

describe('shard selection where nothing is labelled', () => {
  it('sends ranges the API server keeps exactly what the proxy admits, limits on the mesh labels included', () => {
    fc.assert(
      fc.property(bucketSet, limit, namespaces, fc.option(fc.constantFrom('foo', 'bar')), (owned, l, namespace, app) => {
        const matchExpressions = [
          ...(l.hashIn ? [{ key: 'h', operator: 'In' as const, values: l.hashIn }] : []),
          ...(l.namespaceNotIn ? [{ key: 'n', operator: 'NotIn' as const, values: l.namespaceNotIn }] : []),
          ...(l.namespaceIn ? [{ key: 'n', operator: 'In' as const, values: l.namespaceIn }] : []),
          ...(l.app ? [{ key: 'app', operator: 'In' as const, values: [l.app] }] : []),
        ];
        const view = viewOf(owned, {
          selection: 'shardSelector',
          limits: [{ relateResources: [{ apiGroups: [''], resources: ['configmaps'] }], selector: { matchExpressions } }],
        });
        const selection = view.selectionFor('', 'configmaps');
        const objectLabels: Record<string, string> = app ? { app } : {};
        const labelsMatch = matches(parseSelector(view.selectorWith('', 'configmaps', undefined)), objectLabels);
        const server = selection.shardSelector === undefined ? false : serverKeeps(selection.shardSelector, namespace) && labelsMatch;
        expect(server).toBe(view.admits('', 'configmaps', { namespace, labels: objectLabels }));
        // No mesh label is ever asked of the server: objects carry none.
        expect(selection.labels.every((r) => r.key === 'app' || r.operator === 'Exists' || r.operator === 'DoesNotExist')).toBe(true);
      }),
    );
  });

  it('admits by the namespace, never by a (stale or forged) hash label', () => {
    const ns = 'team-a';
    const view = viewOf([bucketOf(ns, settings)], { selection: 'shardSelector' });
    expect(view.admits('', 'configmaps', { namespace: ns })).toBe(true);
    expect(view.admits('', 'configmaps', { namespace: 'elsewhere-1', labels: { h: String(bucketOf(ns, settings)) } })).toBe(bucketOf('elsewhere-1', settings) === bucketOf(ns, settings));
    // A Namespace is judged by its own name.
    expect(view.admits('', 'namespaces', { name: ns })).toBe(true);
  });

  it('renders one range per run of adjacent buckets, in the API server\'s spelling', () => {
    const view = viewOf([0, 1, 2, 5], { selection: 'shardSelector' });
    expect(view.selectionFor('', 'configmaps').shardSelector).toBe(
      "shardRange(object.metadata.namespace, '0x0000000000000000', '0x1800000000000000') || " +
        "shardRange(object.metadata.namespace, '0x2800000000000000', '0x3000000000000000')",
    );
    expect(view.selectorWith('', 'configmaps', undefined)).toBe('');
    expect(view.selectorWith('', 'configmaps', 'app=foo')).toBe('app=foo');
  });

  it('matches nothing with a label selector when nothing is owned, and filters Namespaces and proxyFilter lists itself', () => {
    const none = viewOf([], { selection: 'shardSelector' }).selectionFor('', 'configmaps');
    expect(none.shardSelector).toBeUndefined();
    expect(none.filterLists).toBe(false);
    expect(none.labels.map((r) => r.operator)).toEqual(['Exists', 'DoesNotExist']);
    const namespaced = viewOf([1], { selection: 'shardSelector' }).selectionFor('', 'namespaces');
    expect([namespaced.shardSelector, namespaced.filterLists]).toEqual([undefined, true]);
    const filtered = viewOf([1], { selection: 'proxyFilter' }, 'kusionstack').selectionFor('', 'configmaps');
    expect([filtered.shardSelector, filtered.filterLists]).toEqual([undefined, true]);
    // Shard selectors need fnv buckets: a table asking for them with another hash is filtered by the proxy.
    expect(viewOf([1], { selection: 'shardSelector' }, 'kusionstack').selection).toBe('proxyFilter');
  });

  it('changes the watch key with the buckets in every mode, so a revocation ends the watch', () => {
    for (const selection of [undefined, 'shardSelector', 'proxyFilter'] as const) {
      const route = selection ? { selection } : {};
      expect(viewOf([1, 2], route).selectorFor('', 'configmaps')).not.toBe(viewOf([1], route).selectorFor('', 'configmaps'));
    }
  });
});

const list = (selector: string | undefined, items: { namespace: string }[]): string =>
  JSON.stringify({
    kind: 'ConfigMapList',
    apiVersion: 'v1',
    metadata: { resourceVersion: '7', ...(selector ? { shardInfo: { selector } } : {}), remainingItemCount: 3 },
    items: items.map((m) => ({ metadata: { name: 'cm', ...m } })),
  });


/** The answer in pieces of `size` bytes, as a socket may deliver it. */
const inPieces = (text: string, size: number): Readable => Readable.from([...Array(Math.ceil(text.length / size)).keys()].map((i) => Buffer.from(text.slice(i * size, (i + 1) * size))));

describe('list answers where nothing is labelled', () => {
  const SELECTOR = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')";
  const admit = (m: { namespace?: string }): boolean => m.namespace === 'mine';

  it('pass untouched, byte for byte, when the API server echoes the selector sent', async () => {
    for (const size of [1, 7, 64, 100_000]) {
      const text = list(SELECTOR, [{ namespace: 'mine' }, { namespace: 'mine' }]);
      let filtered = 0;
      const out = await judgeList(inPieces(text, size), { expected: SELECTOR, admit, onFiltered: () => filtered++, sealContinue: markContinue });
      expect(await drain(out)).toBe(text);
      expect(filtered).toBe(0);
    }
  });

  it('are filtered by the proxy when the echo is missing, different or only inside an object', async () => {
    const forged = JSON.stringify({ kind: 'List', metadata: {}, items: [{ metadata: { namespace: 'theirs', shardInfo: { selector: SELECTOR } } }, { metadata: { namespace: 'mine' } }] });
    for (const text of [list(undefined, [{ namespace: 'mine' }, { namespace: 'theirs' }]), list(`${SELECTOR} || x`, [{ namespace: 'theirs' }, { namespace: 'mine' }]), forged]) {
      const unconfirmed: boolean[] = [];
      const out = JSON.parse(await drain(await judgeList(inPieces(text, 5), { expected: SELECTOR, admit, onFiltered: (u) => unconfirmed.push(u), sealContinue: markContinue }))) as {
        items: { metadata: { namespace: string } }[];
        metadata: Record<string, unknown>;
      };
      expect(out.items.map((i) => i.metadata.namespace)).toEqual(['mine']);
      expect(out.metadata.remainingItemCount).toBeUndefined();
      expect(unconfirmed).toEqual([true]);
    }
  });

  it('reads the echo only from the list\'s own metadata', () => {
    expect(echoedSelector(Buffer.from(list(SELECTOR, [])))).toBe(SELECTOR);
    expect(echoedSelector(Buffer.from('{"kind":"X","metadata":{"continue":"\\"items\\":"},"items":[]}'))).toBeUndefined();
    expect(echoedSelector(Buffer.from('{"metadata":{"shardInfo":{"selector":1}},"items":[]}'))).toBeUndefined();
  });

  it('filter Table rows, and refuse what is not a JSON list', () => {
    const table = JSON.stringify({ kind: 'Table', rows: [{ object: { metadata: { namespace: 'theirs' } } }, { object: { metadata: { namespace: 'mine' } } }] });
    expect((JSON.parse(filterListBody(table, admit, markContinue)) as { rows: unknown[] }).rows).toHaveLength(1);
    expect(() => filterListBody('\u0000protobuf', admit, markContinue)).toThrow(UnjudgedListError);
    expect(() => filterListBody('{"kind":"Status"}', admit, markContinue)).toThrow(UnjudgedListError);
    expect(() => filterListBody('null', admit, markContinue)).toThrow(UnjudgedListError);
  });
});

describe('objects sharded by uid', () => {
  const view = viewOf([0, 1, 2, 3], { selection: 'shardSelector', objectSharding: [{ apiGroups: [''], resources: ['configmaps'] }] });

  it('are selected by uid ranges, judged by the uid\'s bucket, and need a uid', () => {
    expect(view.selectionFor('', 'configmaps').shardSelector).toBe("shardRange(object.metadata.uid, '0x0000000000000000', '0x2000000000000000')");
    expect(view.selectionFor('', 'secrets').shardSelector).toContain('object.metadata.namespace');
    fc.assert(
      fc.property(fc.uuid(), namespaces, (uid, namespace) => {
        expect(view.admits('', 'configmaps', { uid, namespace })).toBe(view.objectBucketOf(uid) < 4);
        expect(view.objectBucketOf(uid)).toBe(bucketOf(uid, settings));
      }),
    );
    expect(view.admits('', 'configmaps', { namespace: 'x' })).toBe(false);
  });

  it('decide: lists are sharded, creates pass, every other verb on one object waits for its uid', async () => {
    const { decide } = await import('../../../src/proxy/request/judgement/enforce.js');
    const info = (verb: string, name?: string) => ({ kind: 'resource' as const, verb: verb as never, group: '', version: 'v1', resource: 'configmaps', subresource: undefined, namespace: 'ns', name });
    expect(decide(info('list'), view, 's')).toEqual({ kind: 'forward', sharded: true });
    expect(decide(info('create'), view, 's')).toEqual({ kind: 'forward' });
    for (const verb of ['get', 'update', 'patch', 'delete']) expect(decide(info(verb, 'cm'), view, 's')).toEqual({ kind: 'forward', byObject: true });
    expect(decide({ ...info('patch', 'cm'), subresource: 'status' }, view, 's')).toEqual({ kind: 'forward', byObject: true });
    // A subresource whose target the uid cannot pin (logs, exec, eviction, scale) is refused, never passed.
    for (const [verb, subresource] of [['get', 'log'], ['create', 'exec'], ['create', 'eviction'], ['update', 'scale'], ['create', undefined]] as const) {
      expect(decide({ ...info(verb, 'cm'), subresource }, view, 's')).toMatchObject({ kind: 'deny', body: { code: 403 } });
    }
  });
});

describe('withUidPrecondition', () => {
  const UID = 'u-1';
  const JUDGED = { uid: UID, resourceVersion: '42' };
  it('adds the uid to the write in the form the API server checks', async () => {
    const { withUidPrecondition } = await import('../../../src/proxy/request/judgement/uid-precondition.js');
    const body = (r: ReturnType<typeof withUidPrecondition>): unknown => ('code' in r ? r : JSON.parse(r.body));
    expect(body(withUidPrecondition('delete', undefined, '', JUDGED))).toMatchObject({ kind: 'DeleteOptions', preconditions: { uid: UID } });
    expect(body(withUidPrecondition('delete', 'application/json', '{"propagationPolicy":"Foreground","preconditions":{"resourceVersion":"5"}}', JUDGED))).toEqual({
      propagationPolicy: 'Foreground',
      preconditions: { resourceVersion: '5', uid: UID },
    });
    expect(body(withUidPrecondition('update', 'application/json; charset=utf-8', '{"metadata":{"name":"cm"},"data":{}}', JUDGED))).toEqual({ metadata: { name: 'cm', uid: UID }, data: {} });
    // A merge patch carries the resourceVersion read too: a status strategy copies the stored uid over the patch's.
    expect(body(withUidPrecondition('patch', 'application/merge-patch+json', '{"data":{"a":"b"}}', JUDGED))).toEqual({ data: { a: 'b' }, metadata: { uid: UID, resourceVersion: '42' } });
    expect(body(withUidPrecondition('patch', 'application/strategic-merge-patch+json', `{"metadata":{"uid":"${UID}","resourceVersion":"42"}}`, JUDGED))).toEqual({ metadata: { uid: UID, resourceVersion: '42' } });
    expect(body(withUidPrecondition('update', 'application/json', '{"metadata":{"uid":null}}', JUDGED))).toEqual({ metadata: { uid: UID } });
    expect(body(withUidPrecondition('patch', 'application/json-patch+json', '[{"op":"remove","path":"/data"}]', JUDGED))).toEqual([
      { op: 'test', path: '/metadata/uid', value: UID },
      { op: 'remove', path: '/data' },
    ]);
  });
  it('refuses a client uid that is not the judged one: another object\'s, or "" (no precondition to the API server)', async () => {
    const { withUidPrecondition } = await import('../../../src/proxy/request/judgement/uid-precondition.js');
    for (const uid of ['', 'other', 0, { a: 1 }]) {
      const text = JSON.stringify(uid);
      expect(withUidPrecondition('update', 'application/json', `{"metadata":{"uid":${text}}}`, JUDGED)).toMatchObject({ code: 409 });
      expect(withUidPrecondition('patch', 'application/merge-patch+json', `{"metadata":{"uid":${text}}}`, JUDGED)).toMatchObject({ code: 409 });
      expect(withUidPrecondition('patch', 'application/strategic-merge-patch+json', `{"metadata":{"uid":${text}}}`, JUDGED)).toMatchObject({ code: 409 });
      expect(withUidPrecondition('delete', 'application/json', `{"preconditions":{"uid":${text}}}`, JUDGED)).toMatchObject({ code: 409 });
    }
    expect(withUidPrecondition('patch', 'application/merge-patch+json', '{"metadata":{"resourceVersion":"41"}}', JUDGED)).toMatchObject({ code: 409 });
    // The last of duplicate keys is what the API server would read, and what is judged.
    expect(withUidPrecondition('update', 'application/json', `{"metadata":{"uid":"${UID}","uid":""}}`, JUDGED)).toMatchObject({ code: 409 });
  });

  it('refuses what it cannot carry the uid in: apply patches, protobuf, non-objects, duplicate-key tricks come out single', async () => {
    const { withUidPrecondition } = await import('../../../src/proxy/request/judgement/uid-precondition.js');
    expect(withUidPrecondition('patch', 'application/apply-patch+yaml', 'data: {}', JUDGED)).toMatchObject({ code: 415 });
    expect(withUidPrecondition('update', 'application/vnd.kubernetes.protobuf', '\u0000k8s', JUDGED)).toMatchObject({ code: 415 });
    expect(withUidPrecondition('patch', 'application/merge-patch+json', '[1]', JUDGED)).toMatchObject({ code: 400 });
    expect(withUidPrecondition('patch', 'application/merge-patch+json', '{"metadata":null}', JUDGED)).toMatchObject({ code: 400 });
    expect(withUidPrecondition('delete', 'application/json', 'nope', JUDGED)).toMatchObject({ code: 400 });
    // Two `metadata` keys: what is forwarded has one, the one judged (JSON.parse keeps the last, as Go does).
    const twice = withUidPrecondition('patch', 'application/merge-patch+json', '{"metadata":{"uid":"a"},"metadata":{"labels":{"x":"y"}}}', JUDGED);
    expect('body' in twice && twice.body).toBe('{"metadata":{"labels":{"x":"y"},"uid":"u-1","resourceVersion":"42"}}');
  });
});
