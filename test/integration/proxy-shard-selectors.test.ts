import { CoreV1Api } from '@kubernetes/client-node';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bucketOf, createHashSettings } from '../../src/sharding/index.js';
import type { ClusterRoute, RouteTable } from '../../src/transport/index.js';
import { clusterRoute, routeTable, settles, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { cluster, kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

const settings = createHashSettings({ algorithm: 'fnv-range', bucketCount: 32 });
const fnvBucket = (namespace: string): number => bucketOf(namespace, settings);

interface Item {
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
}

/**
 * A shard whose cluster's objects carry no labels, on the real API server of either minor: on v1.37 (gate on) the
 * proxy sends `shardSelector` and passes the echoed answer through; on v1.33, which ignores the parameter, the same
 * table makes the proxy filter every list itself (no echo). Each case judges by what the client got and what the
 * API server executed.
 */
describe('lists and watches sharded without labels (shardSelector, and the proxy\'s own filter)', () => {
  const bed = cluster(0);
  const admin = kubeConfigFor(bed).makeApiClient(CoreV1Api);
  const selectors = testbed().kubeVersion.startsWith('v1.37');
  // Owned: the buckets of the first three namespaces; the others are (by bucket) another shard's.
  const namespaces: string[] = [];
  let owned: number[] = [];
  let harness: TestProxy;
  let version = 1;

  const table = (selection: ClusterRoute['selection'], buckets = owned): RouteTable => ({
    ...routeTable({ shard: 'shard-0', homeCluster: bed.name, version: version++, clusters: [clusterRoute(bed, buckets, selection ? { selection } : {})] }),
    hashAlgorithm: 'fnv-range',
  });
  const api = (path: string, init: RequestInit = {}): Promise<Response> => fetch(`${harness.proxy.apiUrl}${path}`, init);
  const metric = async (name: string, label: string): Promise<number> => {
    const text = await (await fetch(`${harness.proxy.opsUrl}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(label));
    return line === undefined ? 0 : Number(line.split(' ').pop());
  };
  const ours = (items: Item[]): Item[] => items.filter((i) => namespaces.includes(i.metadata.namespace ?? i.metadata.name));

  beforeAll(async () => {
    while (namespaces.length < 8) {
      const ns = uniqueName('unlabelled');
      // Three owned namespaces in distinct buckets, five in buckets none of them has.
      const b = fnvBucket(ns);
      const taken = namespaces.slice(0, 3).map(fnvBucket);
      if (taken.includes(b)) continue;
      namespaces.push(ns);
    }
    owned = namespaces.slice(0, 3).map(fnvBucket);
    for (const ns of namespaces) {
      await admin.createNamespace({ body: { metadata: { name: ns } } });
      await admin.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'plain' } } });
      await admin.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'tagged', labels: { app: 'demo' } } } });
    }
    harness = await startTestProxy({ table: table('shardSelector'), credentialsPath: testbed().kubeconfigPath });
  }, 120_000);

  afterAll(async () => {
    await harness?.close();
    for (const ns of namespaces) await admin.deleteNamespace({ name: ns }).catch(() => undefined);
  });

  it('lists exactly the owned namespaces\' objects, confirmed by the server\'s echo on v1.37 and filtered by the proxy on v1.33', async () => {
    const before = await metric('ctrlmesh_proxy_lists_filtered_total', 'reason="no-echo"');
    const res = await api('/api/v1/configmaps');
    expect(res.status).toBe(200);
    const body = (await res.json()) as { items: Item[]; metadata: { shardInfo?: { selector: string } } };
    // Nothing outside the shard, from any namespace of the bed, and everything of ours inside it.
    expect(body.items.every((i) => owned.includes(fnvBucket(i.metadata.namespace!)))).toBe(true);
    expect(ours(body.items).map((i) => `${i.metadata.namespace}/${i.metadata.name}`).sort()).toEqual(
      namespaces.slice(0, 3).flatMap((ns) => [`${ns}/plain`, `${ns}/tagged`]).sort(),
    );
    expect(body.metadata.shardInfo !== undefined).toBe(selectors);
    expect((await metric('ctrlmesh_proxy_lists_filtered_total', 'reason="no-echo"')) - before).toBe(selectors ? 0 : 1);
  });

  it('keeps the client\'s own label selector, and a protobuf client gets filtered JSON', async () => {
    const tagged = (await (await api('/api/v1/configmaps?labelSelector=app%3Ddemo')).json()) as { items: Item[] };
    expect(ours(tagged.items).map((i) => i.metadata.namespace).sort()).toEqual(namespaces.slice(0, 3).sort());
    expect(ours(tagged.items).every((i) => i.metadata.name === 'tagged')).toBe(true);
    const res = await api('/api/v1/configmaps', { headers: { accept: 'application/vnd.kubernetes.protobuf, application/json' } });
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(((await res.json()) as { items: Item[] }).items.every((i) => owned.includes(fnvBucket(i.metadata.namespace!)))).toBe(true);
  });

  it('refuses what it cannot judge without labels: a client shard selector, a collection delete (nothing deleted)', async () => {
    const all = encodeURIComponent("shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')");
    expect((await api(`/api/v1/configmaps?shardSelector=${all}`)).status).toBe(400);
    expect((await api(`/api/v1/configmaps?shardSelector=${all}&shardSelector=${all}`)).status).toBe(400);
    expect((await api(`/api/v1/namespaces/${namespaces[0]}/configmaps`, { method: 'DELETE' })).status).toBe(403);
    expect((await admin.listNamespacedConfigMap({ namespace: namespaces[0]! })).items.length).toBeGreaterThanOrEqual(2);
  });

  it('judges single objects by the namespace\'s fnv bucket: another shard\'s object is not found, and not written', async () => {
    expect((await api(`/api/v1/namespaces/${namespaces[0]}/configmaps/plain`)).status).toBe(200);
    expect((await api(`/api/v1/namespaces/${namespaces[5]}/configmaps/plain`)).status).toBe(404);
    const patch = await api(`/api/v1/namespaces/${namespaces[5]}/configmaps/plain`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ data: { x: 'y' } }),
    });
    expect(patch.status).toBe(403);
    expect((await admin.readNamespacedConfigMap({ name: 'plain', namespace: namespaces[5]! })).data).toBeUndefined();
  });

  it('watches only owned objects (filtered by the server on v1.37, by the proxy on v1.33); a revoked bucket ends the watch with 410', async () => {
    const dropped = (): Promise<number> => metric('ctrlmesh_proxy_watch_events_filtered_total', `cluster="${bed.name}"`);
    const droppedBefore = await dropped();
    const res = await api('/api/v1/configmaps?watch=1&allowWatchBookmarks=false');
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let text = '';
    const events = (): { type: string; object: Item & { code?: number } }[] =>
      text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; object: Item & { code?: number } });
    const pump = (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        text += Buffer.from(value).toString('utf8');
      }
    })();
    for (const ns of [namespaces[1]!, namespaces[6]!]) await admin.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'during-watch' } } });
    await settles(() => expect(events().some((e) => e.object.metadata.name === 'during-watch')).toBe(true));
    await new Promise((r) => setTimeout(r, 500));
    const seen = events().filter((e) => e.type !== 'ERROR');
    expect(seen.every((e) => owned.includes(fnvBucket(e.object.metadata.namespace!)))).toBe(true);
    expect(seen.filter((e) => e.object.metadata.name === 'during-watch').map((e) => e.object.metadata.namespace)).toEqual([namespaces[1]]);
    // The other shard's new object reached the proxy only where the server ignores shard selectors.
    if (selectors) expect((await dropped()) - droppedBefore).toBe(0);
    else expect((await dropped()) - droppedBefore).toBeGreaterThan(0);
    // The table loses a bucket: the watch carrying it ends, telling the client to list again.
    await harness.writeTable(table('shardSelector', owned.slice(1)));
    await settles(() => expect(events().some((e) => e.type === 'ERROR' && e.object.code === 410)).toBe(true));
    await pump;
  });

  it('filters lists itself where the table says no server-side filter exists (proxyFilter), the same objects again', async () => {
    await harness.writeTable(table('proxyFilter'));
    await settles(() => expect(harness.proxy.controller.current?.clusters.get(bed.name)?.view.selection).toBe('proxyFilter'));
    const before = await metric('ctrlmesh_proxy_lists_filtered_total', 'reason="unlabelled"');
    const body = (await (await api('/api/v1/configmaps')).json()) as { items: Item[] };
    expect(ours(body.items).map((i) => i.metadata.namespace).sort()).toEqual(namespaces.slice(0, 3).flatMap((ns) => [ns, ns, ...(ns === namespaces[1] ? [ns] : [])]).sort());
    expect(body.items.every((i) => owned.includes(fnvBucket(i.metadata.namespace!)))).toBe(true);
    expect((await metric('ctrlmesh_proxy_lists_filtered_total', 'reason="unlabelled"')) - before).toBe(1);
  });

  /** Reads a watch through the proxy until `until` holds of what came, then leaves it. */
  const watchUntil = async (path: string, headers: Record<string, string>, act: () => Promise<void>, until: (text: string) => boolean): Promise<string> => {
    const abort = new AbortController();
    const res = await api(path, { headers, signal: abort.signal });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let text = '';
    const pump = (async () => {
      for (;;) {
        const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
        if (done) return;
        text += Buffer.from(value).toString('utf8');
      }
    })();
    await act();
    await settles(() => expect(until(text)).toBe(true));
    abort.abort();
    await pump;
    return text;
  };

  it("under proxyFilter, a watch shows no other shard's object, deleted ones included, and never their data", async () => {
    const marker = `not-for-this-shard-${version}`;
    const encoded = Buffer.from(marker).toString('base64');
    const name = uniqueName('deleted');
    const text = await watchUntil(
      '/api/v1/secrets?watch=1',
      {},
      async () => {
        // The other shard's Secret first: by the time the own one's deletion arrives, its events have too.
        for (const ns of [namespaces[5]!, namespaces[0]!]) {
          await admin.createNamespacedSecret({ namespace: ns, body: { metadata: { name }, stringData: { v: marker } } });
          await admin.deleteNamespacedSecret({ name, namespace: ns });
        }
      },
      (got) => got.includes('"DELETED"') && got.includes(namespaces[0]!),
    );
    const events = text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; object: Item });
    expect(events.filter((e) => e.object.metadata.name === name).map((e) => `${e.type} ${e.object.metadata.namespace}`)).toEqual([
      `ADDED ${namespaces[0]}`,
      `DELETED ${namespaces[0]}`,
    ]);
    expect(events.every((e) => owned.includes(fnvBucket(e.object.metadata.namespace!)))).toBe(true);
    expect(text.split(encoded)).toHaveLength(3);
  });

  it('a Table asked for with spaces around `=` is a Table to the proxy too: its rows are judged, none without its object', async () => {
    // The API server trims the spaces; a proxy that did not would see no Table and leave includeObject=None, rows bare.
    const accept = { accept: 'application/json; as= Table ; g=meta.k8s.io; v=v1' };
    const list = (await (await api('/api/v1/configmaps?includeObject=None', { headers: accept })).json()) as { kind: string; rows: { object?: Item }[] };
    expect(list.kind).toBe('Table');
    const listed = list.rows.map((r) => r.object?.metadata.namespace);
    expect(listed.every((ns) => ns !== undefined && owned.includes(fnvBucket(ns)))).toBe(true);
    expect(listed.filter((ns) => namespaces.includes(ns!)).sort()).toEqual(namespaces.slice(0, 3).flatMap((ns) => [ns, ns, ...(ns === namespaces[1] ? [ns] : [])]).sort());
    const name = uniqueName('row');
    const text = await watchUntil(
      '/api/v1/configmaps?watch=1&includeObject=None',
      accept,
      async () => {
        for (const ns of [namespaces[6]!, namespaces[2]!]) await admin.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name } } });
      },
      (got) => got.includes(name),
    );
    const rows = text.split('\n').filter(Boolean).flatMap((l) => (JSON.parse(l) as { object: { rows?: { cells: unknown[]; object?: Item }[] } }).object.rows ?? []);
    expect(rows.map((r) => r.object?.metadata.namespace).filter((ns) => ns === undefined || !owned.includes(fnvBucket(ns)))).toEqual([]);
    expect(rows.filter((r) => r.cells[0] === name).map((r) => r.object?.metadata.namespace)).toEqual([namespaces[2]]);
  });
});

/**
 * One namespace's objects spread over two shards by uid (`spec.objectSharding`): on v1.37 the server filters lists
 * and watches by uid range, on v1.33 the proxy does; single objects are judged from the answer (reads) or after a
 * read (writes, which then carry the uid as a precondition the API server enforces).
 */
describe('objects sharded one by one, by uid', () => {
  const bed = cluster(0);
  const admin = kubeConfigFor(bed).makeApiClient(CoreV1Api);
  const namespace = uniqueName('by-uid');
  const halves = [Array.from({ length: 16 }, (_, i) => i), Array.from({ length: 16 }, (_, i) => i + 16)];
  const uidBucket = (uid: string): number => fnvBucket(uid);
  const shards: TestProxy[] = [];
  const uids = new Map<string, string>();

  const table = (shard: number): RouteTable => ({
    ...routeTable({
      shard: `shard-${shard}`,
      homeCluster: bed.name,
      clusters: [clusterRoute(bed, halves[shard]!, { selection: 'shardSelector', objectSharding: [{ apiGroups: [''], resources: ['configmaps'] }] })],
    }),
    hashAlgorithm: 'fnv-range',
  });
  const api = (shard: number, path: string, init: RequestInit = {}): Promise<Response> => fetch(`${shards[shard]!.proxy.apiUrl}${path}`, init);
  const ownerOf = (name: string): number => (uidBucket(uids.get(name)!) < 16 ? 0 : 1);
  const path = (name = ''): string => `/api/v1/namespaces/${namespace}/configmaps${name ? `/${name}` : ''}`;

  beforeAll(async () => {
    await admin.createNamespace({ body: { metadata: { name: namespace } } });
    for (let i = 0; i < 24; i++) {
      const cm = await admin.createNamespacedConfigMap({ namespace, body: { metadata: { name: `cm-${i}` } } });
      uids.set(`cm-${i}`, cm.metadata!.uid!);
    }
    for (const shard of [0, 1]) shards.push(await startTestProxy({ table: table(shard), credentialsPath: testbed().kubeconfigPath }));
  }, 120_000);

  afterAll(async () => {
    for (const s of shards) await s.close();
    await admin.deleteNamespace({ name: namespace }).catch(() => undefined);
  });

  it('splits one namespace\'s list between the shards by uid, each object listed by exactly one', async () => {
    const listed = await Promise.all([0, 1].map(async (s) => ((await (await api(s, path())).json()) as { items: Item[] }).items.map((i) => i.metadata.name)));
    expect([...listed[0]!, ...listed[1]!].sort()).toEqual([...uids.keys()].sort());
    for (const s of [0, 1]) expect(listed[s]!.every((name) => ownerOf(name) === s)).toBe(true);
  });

  it('answers a read of another shard\'s object 404 (judged from the answer), its own 200', async () => {
    for (const name of ['cm-0', 'cm-1', 'cm-2', 'cm-3']) {
      for (const s of [0, 1]) expect((await api(s, path(name))).status, `${name} via shard ${s}`).toBe(ownerOf(name) === s ? 200 : 404);
    }
  });

  it('refuses writes to another shard\'s objects after reading them; the owner\'s writes carry the uid and land', async () => {
    const merge = { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: JSON.stringify({ data: { by: 'proxy' } }) };
    for (const name of ['cm-4', 'cm-5', 'cm-6']) {
      const other = 1 - ownerOf(name);
      expect((await api(other, path(name), merge)).status).toBe(403);
      expect((await admin.readNamespacedConfigMap({ name, namespace })).data).toBeUndefined();
      expect((await api(ownerOf(name), path(name), merge)).status).toBe(200);
      expect((await admin.readNamespacedConfigMap({ name, namespace })).data).toEqual({ by: 'proxy' });
    }
    const jsonPatch = { method: 'PATCH', headers: { 'content-type': 'application/json-patch+json' }, body: JSON.stringify([{ op: 'add', path: '/data', value: { j: '1' } }]) };
    expect((await api(ownerOf('cm-7'), path('cm-7'), jsonPatch)).status).toBe(200);
    const apply = { method: 'PATCH', headers: { 'content-type': 'application/apply-patch+yaml' }, body: 'data: {a: b}' };
    expect((await api(ownerOf('cm-7'), `${path('cm-7')}?fieldManager=t`, apply)).status).toBe(415);
    for (const name of ['cm-8', 'cm-9']) {
      expect((await api(1 - ownerOf(name), path(name), { method: 'DELETE' })).status).toBe(403);
      await admin.readNamespacedConfigMap({ name, namespace });
      expect((await api(ownerOf(name), path(name), { method: 'DELETE' })).status).toBe(200);
      await expect(admin.readNamespacedConfigMap({ name, namespace })).rejects.toThrow();
      uids.delete(name);
    }
  });

  it('the API server refuses the forwarded write when the name now has another uid (the precondition is real)', async () => {
    const { withUidPrecondition } = await import('../../src/proxy/request/judgement/uid-precondition.js');
    const stale = '00000000-0000-0000-0000-000000000000';
    const dispatcher = new Agent({ connect: { ca: bed.caPem, cert: bed.clientCertPem, key: bed.clientKeyPem } });
    const direct = async (method: string, name: string, judged: ReturnType<typeof withUidPrecondition>): Promise<{ status: number }> => {
      if ('code' in judged) throw new Error(judged.message);
      const res = await undiciFetch(`${bed.server}${path(name)}`, { method, headers: { 'content-type': judged.contentType }, body: judged.body, dispatcher });
      await res.arrayBuffer();
      return res;
    };
    // A merge patch carries the resourceVersion read, which no longer matches (409); a failed JSON-patch test is 422.
    expect((await direct('PATCH', 'cm-10', withUidPrecondition('patch', 'application/merge-patch+json', '{"data":{"x":"y"}}', { uid: stale, resourceVersion: '1' }))).status).toBe(409);
    expect((await direct('PATCH', 'cm-10', withUidPrecondition('patch', 'application/json-patch+json', '[{"op":"add","path":"/data","value":{}}]', { uid: stale, resourceVersion: '1' }))).status).toBe(422);
    expect((await direct('DELETE', 'cm-10', withUidPrecondition('delete', undefined, '', { uid: stale, resourceVersion: '1' }))).status).toBe(409);
    expect((await admin.readNamespacedConfigMap({ name: 'cm-10', namespace })).data).toBeUndefined();
    await dispatcher.close();
  });

  it('watches only its own uids; any shard may create, and the new object goes to its uid\'s owner', async () => {
    const res = await api(0, `${path()}?watch=1`);
    const reader = res.body!.getReader();
    let text = '';
    const pump = (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        text += Buffer.from(value).toString('utf8');
      }
    })().catch(() => undefined);
    for (let i = 0; i < 8; i++) {
      const created = await api(1, path(), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ metadata: { name: `new-${i}` } }) });
      expect(created.status).toBe(201);
      uids.set(`new-${i}`, ((await created.json()) as { metadata: { uid: string } }).metadata.uid);
    }
    const mine = [...uids.keys()].filter((n) => n.startsWith('new-') && ownerOf(n) === 0);
    const seen = (): string[] => text.split('\n').filter(Boolean).map((l) => (JSON.parse(l) as { object: Item }).object.metadata.name);
    await settles(() => expect(seen().filter((n) => n.startsWith('new-')).sort()).toEqual(mine.sort()));
    await new Promise((r) => setTimeout(r, 500));
    expect(seen().every((n) => ownerOf(n) === 0)).toBe(true);
    await reader.cancel();
    await pump;
  });
});
