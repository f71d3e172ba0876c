import { execFileSync } from 'node:child_process';
import { request } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { ApiException, CoordinationV1Api, CoreV1Api, type V1ConfigMap } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClusterUpstream } from '../../src/proxy/upstream/upstream.js';
import { deadline } from '../../src/runtime/index.js';
import { HASH_LABEL, bucket, clusterRoute, namespaceOutside, routeTable, settles, silent, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { cluster, kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';
import { shardLockName } from '../../src/proxy/index.js';

async function failure(call: Promise<unknown>): Promise<{ code: number; body: { message?: string; reason?: string } }> {
  try {
    await call;
  } catch (err) {
    if (err instanceof ApiException) return { code: err.code, body: JSON.parse(err.body as string) as { message?: string } };
    throw err;
  }
  throw new Error('the call succeeded');
}

/** Reads a watch through the proxy as newline-delimited JSON events, as they arrive. */
function watchEvents(url: string, signal: AbortSignal): { events: { type: string; object: V1ConfigMap & { code?: number } }[]; done: Promise<void> } {
  const events: { type: string; object: V1ConfigMap & { code?: number } }[] = [];
  const done = (async () => {
    const res = await fetch(url, { signal });
    const decoder = new TextDecoder();
    let pending = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      pending += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = pending.indexOf('\n')) >= 0) {
        events.push(JSON.parse(pending.slice(0, nl)));
        pending = pending.slice(nl + 1);
      }
    }
  })().catch((err: unknown) => {
    if ((err as Error).name !== 'AbortError') throw err;
  });
  return { events, done };
}

/** GETs (or HEADs) a URL with node:http (no decoding): the answer's headers and bytes as they came. */
function getRaw(url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<{ headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    request(url, { headers, method }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c)).on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
    })
      .on('error', reject)
      .end();
  });
}

/** Sends an exec upgrade (WebSocket, as kubectl 1.30+ does) through the proxy; resolves with the answer's status and body. */
function execUpgrade(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, {
      headers: {
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-key': Buffer.from('0123456789abcdef').toString('base64'),
        'sec-websocket-version': '13',
        'sec-websocket-protocol': 'v5.channel.k8s.io',
      },
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (c: string) => (body += c)).on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, body: '' });
    });
    req.on('error', reject);
    req.end();
  });
}

/** The sorted namespace/name of a list's items. */
function listedNames(json: Buffer): string[] {
  return (JSON.parse(json.toString('utf8')) as { items: V1ConfigMap[] }).items.map((c) => `${c.metadata?.namespace}/${c.metadata?.name}`).sort();
}

describe('the proxy in front of real API servers, with a static route table', () => {
  const a = cluster(0);
  const b = cluster(1);
  const admin = kubeConfigFor(a).makeApiClient(CoreV1Api);
  const ownedNs = uniqueName('own');
  const owned = new Set([bucket(ownedNs)]);
  const foreignNs = namespaceOutside('foreign', owned);
  const operatorNs = uniqueName('operator');
  let harness: TestProxy;
  let core: CoreV1Api;

  const labelled = (name: string, namespace: string, labels: Record<string, string> = {}) =>
    admin.createNamespacedConfigMap({ namespace, body: { metadata: { name, labels: { [HASH_LABEL]: String(bucket(namespace)), ...labels } } } });

  beforeAll(async () => {
    for (const ns of [ownedNs, foreignNs, operatorNs]) {
      await admin.createNamespace({ body: { metadata: { name: ns, labels: { [HASH_LABEL]: String(bucket(ns)) } } } });
    }
    await labelled('mine', ownedNs, { app: 'demo' });
    await labelled('mine-other-app', ownedNs, { app: 'other' });
    await labelled('theirs', foreignNs, { app: 'demo' });
    const table = routeTable({
      shard: 'shard-1',
      operator: `${operatorNs}/demo`,
      homeCluster: a.name,
      clusters: [
        clusterRoute(a, [...owned], { bucketOwners: { [String(bucket(foreignNs))]: 'shard-2' } }),
        clusterRoute(b, []),
      ],
    });
    harness = await startTestProxy({ table, credentialsPath: testbed().kubeconfigPath });
    core = harness.kubeConfig().makeApiClient(CoreV1Api);
  });

  afterAll(async () => {
    await harness?.close();
    for (const ns of [ownedNs, foreignNs, operatorNs]) await admin.deleteNamespace({ name: ns }).catch(() => undefined);
  });

  it('starts every watch before its first event, the shard\'s and the cluster-scoped ones it passes', async () => {
    const nodes = (await admin.listNode()).metadata?.resourceVersion;
    const configMaps = (await admin.listNamespacedConfigMap({ namespace: ownedNs })).metadata?.resourceVersion;
    // From the current version and without bookmarks: nothing is sent until something changes.
    for (const path of [`/api/v1/nodes?watch=true&resourceVersion=${nodes}`, `/api/v1/namespaces/${ownedNs}/configmaps?watch=true&resourceVersion=${configMaps}`]) {
      const controller = new AbortController();
      const res = await fetch(`${harness.proxy.apiUrl}${path}`, { signal: deadline(controller.signal, 5_000).signal });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      controller.abort();
    }
  });

  it('lists only the shard\'s objects, keeping the client\'s own selector', async () => {
    const all = await core.listConfigMapForAllNamespaces({ labelSelector: 'app=demo' });
    const names = all.items.map((c) => `${c.metadata?.namespace}/${c.metadata?.name}`);
    expect(names).toContain(`${ownedNs}/mine`);
    expect(names).not.toContain(`${ownedNs}/mine-other-app`);
    expect(names).not.toContain(`${foreignNs}/theirs`);
    expect(all.items.every((c) => owned.has(Number(c.metadata?.labels?.[HASH_LABEL])))).toBe(true);
    const foreign = await core.listNamespacedConfigMap({ namespace: foreignNs });
    expect(foreign.items).toEqual([]);
  });

  it('passes a large list encoded to a client that asked for gzip, and decoded to one that takes no encoding', async () => {
    // Over the API server's 128 KiB compression threshold, in the owned namespace, next to a foreign one's.
    const filler = 'x'.repeat(4096);
    for (let i = 0; i < 40; i++) {
      await admin.createNamespacedConfigMap({ namespace: ownedNs, body: { metadata: { name: `big-${i}`, labels: { [HASH_LABEL]: String(bucket(ownedNs)), app: 'big' } }, data: { filler } } });
    }
    await labelled('big-theirs', foreignNs, { app: 'big' });
    const url = `${harness.proxy.apiUrl}/api/v1/configmaps?labelSelector=app%3Dbig`;
    const expected = Array.from({ length: 40 }, (_, i) => `${ownedNs}/big-${i}`).sort();

    // Asked for as gzip by the proxy and decoded for the client, whose bytes are whole and plain JSON.
    for (const headers of [{}, { 'accept-encoding': 'identity' }, { 'accept-encoding': 'gzip;q=0, br' }] as Record<string, string>[]) {
      const plain = await getRaw(url, headers);
      expect(plain.headers['content-encoding']).toBeUndefined();
      // What the API server sends only with an answer it compressed: the proxy read this one encoded.
      expect(plain.headers.vary).toMatch(/accept-encoding/i);
      expect(plain.headers['content-length']).toBe(String(plain.body.length));
      expect(listedNames(plain.body)).toEqual(expected);
    }
    // The client's own encoding passes through: the API server compressed it, the client decodes it.
    const encoded = await getRaw(url, { 'accept-encoding': 'gzip' });
    expect(encoded.headers['content-encoding']).toBe('gzip');
    expect(listedNames(gunzipSync(encoded.body))).toEqual(expected);
  });

  it('sends an answer that ends within 256 KiB whole with its length, and a long list decoded whole for a client that takes no encoding, each complete', async () => {
    const filler = 'y'.repeat(4096);
    for (let i = 0; i < 80; i++) {
      await admin.createNamespacedConfigMap({ namespace: ownedNs, body: { metadata: { name: `huge-${i}`, labels: { [HASH_LABEL]: String(bucket(ownedNs)), app: 'huge' } }, data: { filler } } });
    }
    const url = `${harness.proxy.apiUrl}/api/v1/namespaces/${ownedNs}/configmaps?labelSelector=app%3Dhuge`;
    const all = Array.from({ length: 80 }, (_, i) => `${ownedNs}/huge-${i}`).sort();

    // About 130 KiB: read whole, sent with its length.
    const page = await getRaw(`${url}&limit=30`);
    expect(page.headers['content-length']).toBe(String(page.body.length));
    expect(page.headers['transfer-encoding']).toBeUndefined();
    expect(listedNames(page.body)).toEqual(all.slice(0, 30));
    // About 340 KiB, which the API server compresses to a few KiB: whole with its length to a client that takes gzip
    // (the streaming past 256 KiB is whole-body.test.ts's); read as gzip and decoded whole for one that takes none.
    const whole = await getRaw(url, { 'accept-encoding': 'gzip' });
    expect(whole.headers['content-encoding']).toBe('gzip');
    expect(whole.headers['content-length']).toBe(String(whole.body.length));
    expect(listedNames(gunzipSync(whole.body))).toEqual(all);
    const decoded = await getRaw(url);
    expect(decoded.body.length).toBeGreaterThan(256 * 1024);
    expect(decoded.headers['content-length']).toBe(String(decoded.body.length));
    expect(listedNames(decoded.body)).toEqual(all);
    // One object: whole, byte for byte what the API server answers.
    const one = await getRaw(`${harness.proxy.apiUrl}/api/v1/namespaces/${ownedNs}/configmaps/huge-7`);
    expect(one.headers['content-length']).toBe(String(one.body.length));
    // HEAD (which the API server answers with a Status): no body, and the length the API server gave, not rewritten.
    const head = await getRaw(`${harness.proxy.apiUrl}/api/v1/namespaces/${ownedNs}/configmaps/huge-7`, {}, 'HEAD');
    expect(head.body.length).toBe(0);
    expect(Number(head.headers['content-length'])).toBeGreaterThan(0);
    const read = JSON.parse(one.body.toString('utf8')) as V1ConfigMap;
    const direct = await admin.readNamespacedConfigMap({ namespace: ownedNs, name: 'huge-7' });
    expect([read.metadata?.uid, read.metadata?.resourceVersion, read.data?.filler]).toEqual([direct.metadata?.uid, direct.metadata?.resourceVersion, filler]);
  });

  it('gives an empty list, not an error, in a cluster where the shard owns nothing', async () => {
    await kubeConfigFor(b).makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: ownedNs, labels: { [HASH_LABEL]: String(bucket(ownedNs)) } } } });
    const inB = harness.kubeConfig(b.name).makeApiClient(CoreV1Api);
    const list = await inB.listNamespacedConfigMap({ namespace: ownedNs });
    expect(list.items).toEqual([]);
    await kubeConfigFor(b).makeApiClient(CoreV1Api).deleteNamespace({ name: ownedNs });
  });

  it('answers 404 to reads and 403 naming the owner to writes outside the shard', async () => {
    expect((await core.readNamespacedConfigMap({ name: 'mine', namespace: ownedNs })).metadata?.name).toBe('mine');
    const read = await failure(core.readNamespacedConfigMap({ name: 'theirs', namespace: foreignNs }));
    expect(read.code).toBe(404);
    expect(read.body.reason).toBe('NotFound');
    const write = await failure(core.replaceNamespacedConfigMap({ name: 'theirs', namespace: foreignNs, body: { metadata: { name: 'theirs' }, data: { x: '1' } } }));
    expect(write.code).toBe(403);
    expect(write.body.message).toContain('shard "shard-2"');
    const create = await failure(core.createNamespacedConfigMap({ namespace: foreignNs, body: { metadata: { name: 'sneaky' } } }));
    expect(create.code).toBe(403);
    const del = await failure(core.deleteNamespacedConfigMap({ name: 'theirs', namespace: foreignNs }));
    expect(del.code).toBe(403);
    expect((await admin.readNamespacedConfigMap({ name: 'theirs', namespace: foreignNs })).data).toBeUndefined();
  });

  it('drops watch events of an object relabelled out of the shard', async () => {
    const controller = new AbortController();
    const url = `${harness.proxy.apiUrl}/api/v1/namespaces/${ownedNs}/configmaps?watch=true&labelSelector=app%3Ddemo`;
    const watch = watchEvents(url, controller.signal);
    await settles(() => expect(watch.events.map((e) => e.object.metadata?.name)).toContain('mine'));
    await labelled('moving', ownedNs, { app: 'demo' });
    await settles(() => expect(watch.events.some((e) => e.object.metadata?.name === 'moving')).toBe(true));
    const foreignBucket = String(bucket(foreignNs));
    await admin.patchNamespacedConfigMap(
      { name: 'moving', namespace: ownedNs, body: [{ op: 'replace', path: `/metadata/labels/${HASH_LABEL.replace('/', '~1')}`, value: foreignBucket }] },
    );
    // The API server reports the object leaving the selector as DELETED; later changes to it never reach the shard.
    await settles(() => expect(watch.events.some((e) => e.type === 'DELETED' && e.object.metadata?.name === 'moving')).toBe(true));
    await admin.patchNamespacedConfigMap({ name: 'moving', namespace: ownedNs, body: [{ op: 'add', path: '/data', value: { after: 'move' } }] });
    await labelled('marker', ownedNs, { app: 'demo' });
    await settles(() => expect(watch.events.some((e) => e.object.metadata?.name === 'marker')).toBe(true));
    const afterMove = watch.events.filter((e) => e.object.metadata?.name === 'moving' && e.object.data?.after === 'move');
    expect(afterMove).toEqual([]);
    expect(watch.events.every((e) => e.type === 'DELETED' || e.object.metadata?.labels?.[HASH_LABEL] !== foreignBucket)).toBe(true);
    controller.abort();
    await watch.done;
  });

  it('passes exec upgrades through to the API server inside the shard, and refuses them outside', async () => {
    await admin.createNamespacedPod({ namespace: ownedNs, body: { metadata: { name: 'p', labels: { [HASH_LABEL]: String(bucket(ownedNs)) } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } } });
    // No kubelet in the test bed: the API server itself answers that the pod has no node, through the spliced connection.
    const inside = await execUpgrade(`${harness.proxy.apiUrl}/api/v1/namespaces/${ownedNs}/pods/p/exec?command=true&stdout=true`);
    expect(inside.status).toBe(400);
    expect(inside.body).toContain('does not have a host assigned');
    const outside = await execUpgrade(`${harness.proxy.apiUrl}/api/v1/namespaces/${foreignNs}/pods/p/exec?command=true&stdout=true`);
    expect(outside.status).toBe(404);
    expect(JSON.parse(outside.body).reason).toBe('NotFound');
  });

  it('renames the leader-election lock per shard, and back', async () => {
    const coordination = harness.kubeConfig().makeApiClient(CoordinationV1Api);
    const created = await coordination.createNamespacedLease({ namespace: operatorNs, body: { metadata: { name: 'demo-leader' }, spec: { holderIdentity: 'pod-0' } } });
    expect(created.metadata?.name).toBe('demo-leader');
    const direct = kubeConfigFor(a).makeApiClient(CoordinationV1Api);
    const stored = await direct.readNamespacedLease({ name: shardLockName('demo-leader', 'shard-1'), namespace: operatorNs });
    expect(stored.spec?.holderIdentity).toBe('pod-0');
    expect((await failure(direct.readNamespacedLease({ name: 'demo-leader', namespace: operatorNs }))).code).toBe(404);
    const read = await coordination.readNamespacedLease({ name: 'demo-leader', namespace: operatorNs });
    expect(read.metadata?.name).toBe('demo-leader');
    read.spec = { ...read.spec, holderIdentity: 'pod-1' };
    const replaced = await coordination.replaceNamespacedLease({ name: 'demo-leader', namespace: operatorNs, body: read });
    expect(replaced.metadata?.name).toBe('demo-leader');
    expect((await direct.readNamespacedLease({ name: shardLockName('demo-leader', 'shard-1'), namespace: operatorNs })).spec?.holderIdentity).toBe('pod-1');
  });

  it('never forwards a lock it cannot rename, nor one naming another shard\'s lock', async () => {
    const leases = `${harness.proxy.apiUrl}/apis/coordination.k8s.io/v1/namespaces/${operatorNs}/leases`;
    const other = shardLockName('demo-leader', 'shard-2');
    const post = (type: string, body: string | Buffer): Promise<Response> => fetch(leases, { method: 'POST', headers: { 'content-type': type }, body });
    // CBOR (a map naming the lock, after the self-described tag) and YAML: media types the proxy does not read.
    expect((await post('application/cbor', Buffer.from('d9d9f7a1686d65746164617461a1646e616d656b64656d6f2d6c6561646572', 'hex'))).status).toBe(415);
    expect((await post('application/yaml', 'metadata:\n  name: demo-leader\n')).status).toBe(415);
    // Protobuf cut short: refused, not forwarded.
    expect((await post('application/vnd.kubernetes.protobuf', Buffer.from('6b38730012', 'hex'))).status).toBe(400);
    // Another shard's lock, by its name in the body (squatting it) or in the path (reading or taking it).
    const squat = await post('application/json', JSON.stringify({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: other }, spec: { holderIdentity: 'x' } }));
    expect(squat.status).toBe(403);
    expect(((await squat.json()) as { message: string }).message).toContain('reads and takes only its own');
    expect((await fetch(`${leases}/${other}`)).status).toBe(403);
    expect((await fetch(`${leases}/${shardLockName('demo-leader', 'shard-1')}`, { method: 'DELETE' })).status).toBe(403);
    // Judged by effect: the API server holds no Lease but this shard's own.
    const stored = await kubeConfigFor(a).makeApiClient(CoordinationV1Api).listNamespacedLease({ namespace: operatorNs });
    expect(stored.items.map((l) => l.metadata?.name)).toEqual([shardLockName('demo-leader', 'shard-1')]);
  });

  it('carries many watches as streams of a few connections to the API server, which outlive the watches', async () => {
    // Connections to the API server's port, as the kernel counts them (the proxy's, the test's and the server's own).
    const port = new URL(a.server).port;
    const connections = (): number => execFileSync('ss', ['-Htn', 'state', 'established', `( dport = :${port} )`], { encoding: 'utf8' }).split('\n').filter((l) => l !== '').length;
    const openWatches = async (count: number): Promise<AbortController[]> =>
      Promise.all(
        Array.from({ length: count }, async () => {
          const controller = new AbortController();
          const watch = watchEvents(`${harness.proxy.apiUrl}/api/v1/namespaces/${ownedNs}/configmaps?watch=true&labelSelector=app%3Ddemo`, controller.signal);
          await settles(() => expect(watch.events.map((e) => e.object.metadata?.name)).toContain('mine'));
          return controller;
        }),
      );
    const before = connections();
    const first = await openWatches(40);
    // Over HTTP/1.1 each watch would hold a connection of its own (40 more).
    expect(connections() - before).toBeLessThanOrEqual(3);
    for (const controller of first) controller.abort();
    const during = connections();
    // Ending the watches resets their streams and keeps the connections: the next 40 (an operator's re-watches
    // after a route change) open none.
    const second = await openWatches(40);
    expect(connections() - during).toBeLessThanOrEqual(1);
    for (const controller of second) controller.abort();
  });

  it('ends watches that carried a revoked bucket with 410 Expired, then serves the new table', async () => {
    const controller = new AbortController();
    const watch = watchEvents(`${harness.proxy.apiUrl}/api/v1/configmaps?watch=true`, controller.signal);
    await settles(() => expect(watch.events.length).toBeGreaterThan(0));
    const current = harness.proxy.controller.current!.table;
    await harness.writeTable({ ...current, version: current.version + 1, clusters: current.clusters.map((c) => ({ ...c, buckets: [] })) });
    await watch.done;
    const last = watch.events.at(-1)!;
    expect(last.type).toBe('ERROR');
    expect(last.object.code).toBe(410);
    expect((await failure(core.readNamespacedConfigMap({ name: 'mine', namespace: ownedNs }))).code).toBe(404);
    expect((await core.listConfigMapForAllNamespaces({})).items).toEqual([]);
    await harness.writeTable({ ...current, version: current.version + 2 });
    await settles(async () => expect((await core.readNamespacedConfigMap({ name: 'mine', namespace: ownedNs })).metadata?.name).toBe('mine'));
  });
});

describe('watches as HTTP/2 streams to a real API server', () => {
  it('opens a watch as a stream of a verified HTTP/2 connection and reads its events', async () => {
    const info = cluster(0);
    const upstream = new ClusterUpstream(clusterRoute(info, []), { certPem: info.clientCertPem, keyPem: info.clientKeyPem }, { headersTimeoutMs: 5_000 }, silent);
    const core = kubeConfigFor(info).makeApiClient(CoreV1Api);
    const namespace = uniqueName('h2-watch');
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    try {
      await settles(() => expect(upstream.http2Watches()).toBeDefined(), 10_000);
      const { statusCode, headers, stream } = await upstream.http2Watches()!.request({
        ':method': 'GET',
        ':path': `/api/v1/namespaces/${namespace}/configmaps?watch=true`,
        accept: 'application/json',
      });
      expect(statusCode).toBe(200);
      expect(headers['content-type']).toMatch(/^application\/json/);
      stream.setEncoding('utf8');
      let read = '';
      stream.on('data', (chunk: string) => (read += chunk));
      await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'seen' } } });
      await settles(() => expect(read).toMatch(/"type":"ADDED".*"name":"seen"/));
      stream.destroy();
    } finally {
      await upstream.destroy();
      await core.deleteNamespace({ name: namespace });
    }
  });
});
