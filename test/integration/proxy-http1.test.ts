import { mkdtemp, rm } from 'node:fs/promises';
import { connect as connectTls } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, writeKubeconfig, type ApiServerHandle } from '../../src/dev/index.js';
import type { ClusterRoute, RouteTable } from '../../src/transport/index.js';
import { HASH_LABEL, bucket, clusterRoute, namespaceOutside, routeTable, settles, silent, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { apiServerWatches, kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

interface Event {
  type: string;
  object: { code?: number; metadata: { name: string; namespace?: string } };
}

/**
 * The watch path where the API server offers no HTTP/2 (`--disable-http2-serving`, as behind a load balancer that
 * speaks HTTP/1.1 only): watches then go through reply-from, each on an HTTP/1.1 connection of its own. The same
 * judgements as over HTTP/2 must hold, judged by what the client got and by the watches the API server still serves.
 */
describe('watches to an API server that offers no HTTP/2', () => {
  let dir: string;
  let server: ApiServerHandle;
  let admin: CoreV1Api;
  let harness: TestProxy;
  let version = 1;
  const own = uniqueName('h1-own');
  const foreign = namespaceOutside('h1-foreign', new Set([bucket(own)]));

  const table = (route: Partial<ClusterRoute> = {}, buckets = [bucket(own)]): RouteTable =>
    routeTable({ shard: 'shard-1', homeCluster: server.name, version: version++, clusters: [clusterRoute(server, buckets, route)] });
  const api = (path: string, signal?: AbortSignal): Promise<Response> => fetch(`${harness.proxy.apiUrl}${path}`, signal ? { signal } : {});

  /** Reads a watch through the proxy as it comes; `done` settles when the proxy ends it. */
  const watch = async (path: string, signal: AbortSignal): Promise<{ text: () => string; events: () => Event[]; done: Promise<void> }> => {
    const res = await api(path, signal);
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let text = '';
    const done = (async () => {
      for (;;) {
        const { done: ended, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
        if (ended) return;
        text += Buffer.from(value).toString('utf8');
      }
    })();
    return { text: () => text, events: () => text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Event), done };
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-http1-'));
    server = await startApiServer({ etcd: testbed().etcd, name: uniqueName('http1'), dir: join(dir, 'server'), logger: silent, disableHttp2: true });
    admin = kubeConfigFor(server).makeApiClient(CoreV1Api);
    for (const ns of [own, foreign]) await admin.createNamespace({ body: { metadata: { name: ns, labels: { [HASH_LABEL]: String(bucket(ns)) } } } });
    const credentialsPath = join(dir, 'credentials');
    await writeKubeconfig(credentialsPath, [server]);
    harness = await startTestProxy({ table: table(), credentialsPath, dir: join(dir, 'proxy') });
  }, 120_000);

  afterAll(async () => {
    await harness?.close();
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('is a server that offers HTTP/1.1 alone', async () => {
    const { hostname, port } = new URL(server.server);
    const protocol = await new Promise<string | false | null>((resolve, reject) => {
      const socket = connectTls({ host: hostname, port: Number(port), ca: server.caPem, ALPNProtocols: ['h2', 'http/1.1'] }, () => {
        resolve(socket.alpnProtocol);
        socket.end();
      });
      socket.once('error', reject);
    });
    expect(protocol).toBe('http/1.1');
  });

  it("a watch gets only the shard's objects; a revoked bucket ends it with 410 last, and the API server's watch ends too", async () => {
    const before = await apiServerWatches(server, 'configmaps');
    const controller = new AbortController();
    const w = await watch('/api/v1/configmaps?watch=1', controller.signal);
    await settles(async () => expect(await apiServerWatches(server, 'configmaps')).toBe(before + 1));
    const name = uniqueName('during');
    // The other shard's object first: once the own one arrived, the other's event has reached the proxy too.
    for (const ns of [foreign, own]) {
      await admin.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name, labels: { [HASH_LABEL]: String(bucket(ns)) } } } });
    }
    await settles(() => expect(w.events().some((e) => e.object.metadata.name === name)).toBe(true));
    expect(w.events().filter((e) => e.object.metadata.name === name).map((e) => `${e.type} ${e.object.metadata.namespace}`)).toEqual([`ADDED ${own}`]);
    expect(w.events().every((e) => bucket(e.object.metadata.namespace!) === bucket(own))).toBe(true);

    await harness.writeTable(table({}, []));
    await w.done;
    const last = w.events().at(-1)!;
    expect(last.type).toBe('ERROR');
    expect(last.object.code).toBe(410);
    // Over HTTP/1.1 the proxy ends the API server's watch by closing its connection: none is left running.
    await settles(async () => expect(await apiServerWatches(server, 'configmaps')).toBe(before));
    await harness.writeTable(table());
  });

  it("under proxyFilter, another shard's Secret never reaches the watch, created or deleted, nor its data", async () => {
    await harness.writeTable(table({ selection: 'proxyFilter' }));
    await settles(() => expect(harness.proxy.controller.current?.clusters.get(server.name)?.view.selection).toBe('proxyFilter'));
    const marker = uniqueName('not-for-this-shard');
    const encoded = Buffer.from(marker).toString('base64');
    const name = uniqueName('secret');
    const controller = new AbortController();
    const w = await watch('/api/v1/secrets?watch=1', controller.signal);
    // Unlabelled, as proxyFilter's objects are: the proxy judges each by its namespace's bucket.
    for (const ns of [foreign, own]) {
      await admin.createNamespacedSecret({ namespace: ns, body: { metadata: { name }, stringData: { v: marker } } });
      await admin.deleteNamespacedSecret({ name, namespace: ns });
    }
    await settles(() => expect(w.events().some((e) => e.type === 'DELETED' && e.object.metadata.name === name)).toBe(true));
    controller.abort();
    await w.done;
    expect(w.events().filter((e) => e.object.metadata.name === name).map((e) => `${e.type} ${e.object.metadata.namespace}`)).toEqual([`ADDED ${own}`, `DELETED ${own}`]);
    expect(w.events().every((e) => bucket(e.object.metadata.namespace!) === bucket(own))).toBe(true);
    // The own Secret's data, twice; the other's never.
    expect(w.text().split(encoded)).toHaveLength(3);
  });
});
