import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, startEtcd, writeKubeconfig, type ApiServerHandle, type EtcdHandle } from '../../src/dev/index.js';
import { FileRouteSource, type RouteSource } from '../../src/proxy/index.js';
import { MAX_WAITING_PER_CONNECTION } from '../../src/proxy/request/entry/pipelined.js';
import type { RouteTable } from '../../src/transport/index.js';
import { HASH_LABEL, bucket, clusterRoute, routeTable, settles, silent, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { apiServerMetric, apiServerWatches, kubeConfigFor, uniqueName } from './helpers/testbed.js';

/**
 * Clients that leave before the API server answers. The proxy forwards every request but watches through
 * reply-from, which drops an answer that comes after its client left. The proxy's call must end all the same: a write
 * whose answer is awaited holds back the acknowledgement of the next table (the handover of a revoked bucket), and
 * the breaker's half-open trial call holds back every other request to the cluster. Pipelined requests, which Node
 * dispatches before their turn, and bodies a client breaks off midway belong to the same family. The API server is
 * made slow by pausing its etcd (SIGSTOP), so the request is really on its way while the client leaves.
 */
describe('a client that leaves before the API server answers', () => {
  let dir: string;
  let etcd: EtcdHandle;
  let server: ApiServerHandle;
  let admin: CoreV1Api;
  let harness: TestProxy;
  const namespace = uniqueName('gone');
  const acknowledged: number[] = [];
  let version = 1;

  const table = (): RouteTable => routeTable({ shard: 'shard-1', homeCluster: server.name, version: version++, clusters: [clusterRoute(server, [bucket(namespace)])] });
  const pause = (pid: number | undefined, paused: boolean): void => void process.kill(pid!, paused ? 'SIGSTOP' : 'SIGCONT');
  const url = (path: string): string => `${harness.proxy.apiUrl}${path}`;
  /** Sends a request and leaves it after `ms`, as a client whose timeout ran out. */
  const leaveAfter = async (ms: number, path: string, init: RequestInit = {}): Promise<void> => {
    await expect(fetch(url(path), { ...init, signal: AbortSignal.timeout(ms) })).rejects.toThrow();
  };

  /**
   * Writes `raw` on one connection, then `later` 100 ms after, and reads until the proxy closes it, or leaves after
   * `leaveMs`.
   */
  const onOneConnection = async (raw: string, leaveMs?: number, later?: string): Promise<string> => {
    const { port } = new URL(harness.proxy.apiUrl);
    const socket = connect(Number(port), '127.0.0.1');
    let got = '';
    socket.on('data', (chunk: Buffer) => (got += chunk.toString('utf8')));
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.on('error', () => undefined);
    socket.write(raw);
    if (later !== undefined) setTimeout(() => socket.write(later), 100);
    if (leaveMs !== undefined) setTimeout(() => socket.destroy(), leaveMs);
    await closed;
    return got;
  };
  const head = (method: string, path: string, headers = ''): string => `${method} ${path} HTTP/1.1\r\nHost: proxy\r\n${headers}\r\n`;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-client-gone-'));
    etcd = await startEtcd({ dir: join(dir, 'etcd'), logger: silent });
    server = await startApiServer({ etcd, name: uniqueName('gone'), dir: join(dir, 'server'), logger: silent });
    admin = kubeConfigFor(server).makeApiClient(CoreV1Api);
    await admin.createNamespace({ body: { metadata: { name: namespace, labels: { [HASH_LABEL]: String(bucket(namespace)) } } } });
    await admin.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'cm', labels: { [HASH_LABEL]: String(bucket(namespace)) } } } });
    const credentialsPath = join(dir, 'credentials');
    await writeKubeconfig(credentialsPath, [server]);
    // The file source, with the acknowledgements a hub would receive recorded.
    const source = (path: string): RouteSource => {
      const file = new FileRouteSource({ path, logger: silent, pollIntervalMs: 100 });
      return {
        description: file.description,
        leased: file.leased,
        start: (handlers) => file.start(handlers),
        stop: () => file.stop(),
        acknowledge: async (acked) => void acknowledged.push(acked.version),
      };
    };
    harness = await startTestProxy({ table: table(), credentialsPath, dir: join(dir, 'proxy'), source });
    await settles(() => expect(acknowledged).toContain(1));
  }, 120_000);

  afterAll(async () => {
    pause(etcd?.pid(), false);
    await harness?.close();
    await server?.stop();
    await etcd?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('a write is awaited until the API server answers it, then the next table is acknowledged', async () => {
    await admin.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'doomed', labels: { [HASH_LABEL]: String(bucket(namespace)) } } } });
    pause(etcd.pid(), true);
    try {
      // A write without a body: its request is not complete to Node once the client leaves, and reply-from drops the
      // answer (a write with a body the proxy read gets it handed over as usual).
      await leaveAfter(500, `/api/v1/namespaces/${namespace}/configmaps/doomed`, { method: 'DELETE' });
      // The write is still on its way: the next table is applied, but not acknowledged before it is answered.
      expect(harness.proxy.controller.writes.size).toBe(1);
      await harness.writeTable(table());
      await settles(() => expect(harness.proxy.controller.current?.table.version).toBe(2));
      await new Promise((r) => setTimeout(r, 300));
      expect(acknowledged).not.toContain(2);
    } finally {
      pause(etcd.pid(), false);
    }
    await settles(() => expect(acknowledged).toContain(2), 30_000);
    expect(harness.proxy.controller.writes.size).toBe(0);
    // What the client left did happen: acknowledging only after the answer keeps the old owner's writes before any
    // new owner's.
    expect((await admin.listNamespacedConfigMap({ namespace })).items.map((cm) => cm.metadata?.name)).not.toContain('doomed');
  }, 60_000);

  it("the breaker's half-open trial is a request whose client left: the cluster is served again once it is answered", async () => {
    const get = (): Promise<Response> => fetch(url(`/api/v1/namespaces/${namespace}/configmaps/cm`));
    // The API server is gone: connections are refused and the breaker opens.
    await server.stop();
    const failed = await Promise.all(Array.from({ length: 6 }, async () => (await get()).text()));
    expect(failed.every((body) => body.includes('API server unreachable') || body.includes('circuit breaker is open'))).toBe(true);
    expect(await (await get()).text()).toContain('circuit breaker is open');
    await server.start();
    // After its reset timeout the breaker lets one trial through: it is slow (etcd paused), and its client leaves.
    await new Promise((r) => setTimeout(r, 1_500));
    pause(etcd.pid(), true);
    try {
      await leaveAfter(500, `/api/v1/namespaces/${namespace}/configmaps/cm`);
      expect(await (await get()).text()).toContain('circuit breaker is open');
    } finally {
      pause(etcd.pid(), false);
    }
    await settles(async () => expect((await get()).status).toBe(200), 30_000);
  }, 120_000);

  it('pipelined requests are answered in order; one whose client left before its turn never reaches the API server', async () => {
    const cm = `/api/v1/namespaces/${namespace}/configmaps/cm`;
    const both = await onOneConnection(head('GET', cm) + head('GET', cm, 'Connection: close\r\n'));
    expect(both.match(/^HTTP\/1\.1 200/gmu)).toHaveLength(2);

    await admin.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'kept', labels: { [HASH_LABEL]: String(bucket(namespace)) } } } });
    const watchesBefore = await apiServerWatches(server, 'configmaps');
    pause(etcd.pid(), true);
    try {
      // Behind a read the API server is slow to answer: a delete and a watch, then the client leaves.
      await onOneConnection(head('GET', cm) + head('DELETE', `/api/v1/namespaces/${namespace}/configmaps/kept`) + head('GET', `/api/v1/namespaces/${namespace}/configmaps?watch=1`), 500);
      expect(harness.proxy.controller.writes.size).toBe(0);
      await harness.writeTable(table());
    } finally {
      pause(etcd.pid(), false);
    }
    await settles(() => expect(acknowledged).toContain(version - 1), 30_000);
    await new Promise((r) => setTimeout(r, 1_000));
    expect((await admin.listNamespacedConfigMap({ namespace })).items.map((item) => item.metadata?.name)).toContain('kept');
    expect(await apiServerWatches(server, 'configmaps')).toBe(watchesBefore);
  }, 60_000);

  it('a connection that queues more requests behind a watch than the proxy holds is closed, none of them forwarded', async () => {
    const watchesBefore = await apiServerWatches(server, 'configmaps');
    const cm = head('GET', `/api/v1/namespaces/${namespace}/configmaps/cm`);
    // The watch never ends: the requests behind it would wait for good, each held in memory.
    const got = await onOneConnection(head('GET', `/api/v1/namespaces/${namespace}/configmaps?watch=1`) + cm.repeat(MAX_WAITING_PER_CONNECTION + 8));
    // Closed by the proxy (the client never leaves here), with at most the watch's head sent.
    expect((got.match(/^HTTP\/1\.1 /gmu) ?? []).length).toBeLessThanOrEqual(1);
    expect(got).not.toContain('"kind":"ConfigMap"');
    await settles(async () => expect(await apiServerWatches(server, 'configmaps')).toBe(watchesBefore));
  }, 60_000);

  it("a client's malformed body is its own failure: the API server's breaker stays closed", async () => {
    const create = head('POST', `/api/v1/namespaces/${namespace}/configmaps`, 'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n');
    const body = JSON.stringify({ metadata: { name: 'broken', labels: { [HASH_LABEL]: String(bucket(namespace)) } } });
    // A first chunk that is whole, forwarded as it comes; then what follows is no chunk: the body stops being HTTP in
    // the middle, after the proxy began sending it.
    const first = body.slice(0, 20);
    for (let i = 0; i < 6; i++) await onOneConnection(`${create}${first.length.toString(16)}\r\n${first}\r\n`, 300, `zz\r\n${body.slice(20)}\r\n0\r\n\r\n`);
    expect((await fetch(url(`/api/v1/namespaces/${namespace}/configmaps/cm`))).status).toBe(200);
    expect((await admin.listNamespacedConfigMap({ namespace })).items.map((item) => item.metadata?.name)).not.toContain('broken');
  }, 60_000);

  describe('upgrades (exec, attach, port-forward), which leave the HTTP server for a spliced connection', () => {
    /** exec requests the API server has answered, whatever their answer (no pod has a kubelet here: 404). */
    const execs = (): Promise<number> => apiServerMetric(server, 'apiserver_request_total', ['verb="CONNECT"', 'subresource="exec"']);
    const exec = (extra = ''): string =>
      head('POST', `/api/v1/namespaces/${namespace}/pods/p/exec?command=true&stdout=true`, `Connection: Upgrade\r\nUpgrade: SPDY/3.1\r\n${extra}`);

    it('the test reaches the API server: an exec of a missing pod is forwarded and answered 404', async () => {
      const before = await execs();
      expect(await onOneConnection(exec())).toMatch(/^HTTP\/1\.1 404/u);
      await settles(async () => expect(await execs()).toBe(before + 1));
    });

    it('an upgrade behind an unanswered request on its connection closes the connection, and is never forwarded', async () => {
      const [before, watchesBefore] = [await execs(), await apiServerWatches(server, 'configmaps')];
      // Node hands the connection to the upgrade as soon as its head is read: the watch's stream would carry the
      // API server's answer to the exec in its middle, and the exec would run before its turn.
      const got = await onOneConnection(`${head('GET', `/api/v1/namespaces/${namespace}/configmaps?watch=1`)}${exec()}`);
      // Closed at once: at most the watch's head went out, never an answer to the exec.
      expect((got.match(/^HTTP\/1\.1 /gmu) ?? []).length).toBeLessThanOrEqual(1);
      expect(got).not.toMatch(/^HTTP\/1\.1 (101|404)/mu);
      await new Promise((r) => setTimeout(r, 1_000));
      expect(await execs()).toBe(before);
      await settles(async () => expect(await apiServerWatches(server, 'configmaps')).toBe(watchesBefore));
    });

    it('an upgrade announcing a body gets 400 unsent: the API server would wait for a body sent only after the switch', async () => {
      const before = await execs();
      expect(await onOneConnection(`${exec('Content-Length: 11\r\n')}hello world`)).toMatch(/^HTTP\/1\.1 400/u);
      expect(await onOneConnection(`${exec('Transfer-Encoding: chunked\r\n')}0\r\n\r\n`)).toMatch(/^HTTP\/1\.1 400/u);
      await new Promise((r) => setTimeout(r, 1_000));
      expect(await execs()).toBe(before);
    });

    it('a table that revokes its namespace ends an upgrade still waiting for its answer, before the table is acknowledged', async () => {
      const { port } = new URL(harness.proxy.apiUrl);
      pause(etcd.pid(), true);
      try {
        // The API server reads the pod from etcd before it dials the kubelet: the exec waits on its way.
        const socket = connect(Number(port), '127.0.0.1');
        const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
        socket.on('error', () => undefined);
        socket.write(exec());
        await settles(() => expect(harness.proxy.controller.sessions.size).toBe(1));
        const revoking = routeTable({ shard: 'shard-1', homeCluster: server.name, version: version++, clusters: [clusterRoute(server, [])] });
        await harness.writeTable(revoking);
        await settles(() => expect(acknowledged).toContain(revoking.version));
        // Ended when the table was installed, which comes before its acknowledgement.
        expect(harness.proxy.controller.sessions.size).toBe(0);
        await closed;
      } finally {
        pause(etcd.pid(), false);
      }
      await harness.writeTable(table());
      await settles(() => expect(acknowledged).toContain(version - 1));
    }, 30_000);

    it('an upgrade the API server does not answer gets 504 once the upstream timeout passes', async () => {
      pause(etcd.pid(), true);
      try {
        // The API server reads the pod from etcd before it answers.
        const started = Date.now();
        expect(await onOneConnection(exec())).toMatch(/^HTTP\/1\.1 504/u);
        expect(Date.now() - started).toBeGreaterThanOrEqual(4_500);
      } finally {
        pause(etcd.pid(), false);
      }
    }, 30_000);
  });
});
