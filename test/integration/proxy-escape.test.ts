import { spawn } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveTool } from '../../src/dev/index.js';
import { HASH_LABEL, bucket, clusterRoute, leastPrivilegeKubeconfig, namespaceOutside, refusedBy, routeTable, settles, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { rawRequest, type RawResponse } from './helpers/raw-http.js';
import { cluster, kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';
import { shardLockName } from '../../src/proxy/index.js';

/** The namespace name with some of its letters %-escaped so that the raw text falls in another bucket than the name. */
function encodedInto(name: string, avoid: number): { raw: string; bucket: number } {
  for (let mask = 1; mask < 1 << Math.min(name.length, 12); mask++) {
    const raw = [...name].map((c, i) => ((mask >> i) & 1 ? `%${c.charCodeAt(0).toString(16)}` : c)).join('');
    if (bucket(raw) !== avoid) return { raw, bucket: bucket(raw) };
  }
  throw new Error(`no encoding of ${name} leaves bucket ${avoid}`);
}

/**
 * Escape attempts through a proxy that owns some buckets of cluster a and nothing of cluster b, each judged by its
 * effect: the victim's marker never appears in an answer, and the admin finds the victim's objects as they were.
 */
describe.each(['admin', 'least-privilege'] as const)('the proxy as a trust boundary: no way out of a shard (%s identity)', (identity) => {
  const a = cluster(0);
  const b = cluster(1);
  const admin = kubeConfigFor(a).makeApiClient(CoreV1Api);
  const adminB = kubeConfigFor(b).makeApiClient(CoreV1Api);
  const ownedNs = uniqueName('own');
  const victimNs = namespaceOutside('victim', new Set([bucket(ownedNs)]));
  const encodedVictim = encodedInto(victimNs, bucket(victimNs));
  const owned = new Set([bucket(ownedNs), encodedVictim.bucket]);
  const operatorNs = namespaceOutside('operator', new Set([...owned, bucket(victimNs)]));
  // What a leak would show: the victim's values, in clear (ConfigMaps) and base64 (Secrets).
  const marker = `leak-${Math.random().toString(36).slice(2, 10)}`;
  const markerB64 = Buffer.from(marker).toString('base64');
  let harness: TestProxy;
  let api: string;
  let removeIdentity: (() => Promise<void>) | undefined;
  /** Each request refused, by who refused it: the proxy, or the API server's RBAC (the least-privilege run only). */
  const refused: Record<'proxy' | 'rbac', string[]> = { proxy: [], rbac: [] };

  const leaked = (res: RawResponse): boolean => res.text.includes(marker) || res.text.includes(markerB64);
  const send = async (method: string, target: string, extra: { headers?: Record<string, string>; body?: string; readMs?: number } = {}): Promise<RawResponse> => {
    const res = await rawRequest(api, { method, target, readMs: 3000, ...extra });
    const by = refusedBy(res);
    if (by !== 'none') refused[by].push(`${res.status} ${method} ${target}`);
    return res;
  };

  beforeAll(async () => {
    expect(owned.has(bucket(victimNs))).toBe(false);
    for (const ns of [ownedNs, victimNs, operatorNs]) {
      await admin.createNamespace({ body: { metadata: { name: ns, labels: { [HASH_LABEL]: String(bucket(ns)) } } } });
    }
    await adminB.createNamespace({ body: { metadata: { name: ownedNs, labels: { [HASH_LABEL]: String(bucket(ownedNs)) } } } });
    const labels = (ns: string): Record<string, string> => ({ [HASH_LABEL]: String(bucket(ns)) });
    for (const [client, ns] of [[admin, victimNs], [adminB, ownedNs]] as const) {
      await client.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'victim-cm', labels: labels(ns) }, data: { v: marker } } });
      await client.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'victim-secret', labels: labels(ns) }, stringData: { v: marker } } });
    }
    await admin.createNamespacedConfigMap({ namespace: ownedNs, body: { metadata: { name: 'mine', labels: labels(ownedNs) }, data: { v: 'mine' } } });
    const table = routeTable({
      shard: 'shard-1',
      operator: `${operatorNs}/demo`,
      homeCluster: a.name,
      clusters: [clusterRoute(a, [...owned]), clusterRoute(b, [])],
    });
    let credentialsPath = testbed().kubeconfigPath;
    if (identity === 'least-privilege') {
      credentialsPath = join(await mkdtemp(join(tmpdir(), 'ctrlmesh-escape-')), 'kubeconfig');
      removeIdentity = await leastPrivilegeKubeconfig({ kc: kubeConfigFor(a), cluster: a, namespace: ownedNs, name: uniqueName('esc-operator'), path: credentialsPath });
    }
    harness = await startTestProxy({ table, credentialsPath, maxBodyBytes: 1024 * 1024 });
    api = harness.proxy.apiUrl;
  });

  afterAll(async () => {
    // Which results rest on RBAC: a refusal by the API server's authorizer is one the proxy let through.
    process.stderr.write(`proxy-escape (${identity} identity): ${refused.proxy.length} refused by the proxy, ${refused.rbac.length} by RBAC${refused.rbac.length ? `: ${refused.rbac.join('; ')}` : ''}\n`);
    await harness?.close();
    await removeIdentity?.();
    for (const ns of [ownedNs, victimNs, operatorNs]) await admin.deleteNamespace({ name: ns }).catch(() => undefined);
    await adminB.deleteNamespace({ name: ownedNs }).catch(() => undefined);
  });

  /** The victim's objects and namespace exactly as they were set up. */
  async function victimUntouched(): Promise<void> {
    const cms = await admin.listNamespacedConfigMap({ namespace: victimNs });
    expect(cms.items.map((c) => c.metadata?.name).filter((n) => n !== 'kube-root-ca.crt')).toEqual(['victim-cm']);
    expect(cms.items.find((c) => c.metadata?.name === 'victim-cm')?.data).toEqual({ v: marker });
    const leases = await kubeConfigFor(a).makeApiClient(CoordinationV1Api).listNamespacedLease({ namespace: victimNs });
    expect(leases.items).toEqual([]);
    const ns = await admin.readNamespace({ name: victimNs });
    expect(ns.metadata?.labels).toEqual({ [HASH_LABEL]: String(bucket(victimNs)), 'kubernetes.io/metadata.name': victimNs });
    expect(ns.metadata?.deletionTimestamp).toBeUndefined();
  }

  it('percent-encoded paths are judged decoded, and the decoded path is what is forwarded', async () => {
    const e = encodedVictim.raw;
    const attempts = [
      send('GET', `/api/v1/n%61mespaces/${victimNs}/secrets`),
      send('GET', `/api/v1/namespaces/${e}/configmaps/victim-cm`),
      send('GET', `/api/v1/namespaces/${e}/secrets`),
      send('GET', `/api/v1/namespaces/${victimNs}%2Fconfigmaps%2Fvictim-cm`),
      send('GET', `/api/v1/namespaces/${ownedNs}/configmaps/..%2F..%2F${victimNs}%2Fconfigmaps%2Fvictim-cm`),
      send('GET', `/api/v1/w%61tch/namespaces/${victimNs}/secrets`),
      send('GET', `/clusters/${b.name}/api/v1/n%61mespaces/${ownedNs}/secrets`),
      send('GET', `/clusters/${b.name}/api/v1/namespaces/${ownedNs}/secrets/victim-secret`),
      send('GET', `/%63lusters/${b.name}/api/v1/secrets`),
    ];
    for (const res of await Promise.all(attempts)) expect({ leaked: leaked(res), head: res.headers.split('\r\n')[0] }).toMatchObject({ leaked: false });
    const writes = await Promise.all([
      send('PUT', `/api/v1/namespaces/${e}/configmaps/victim-cm`, { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ metadata: { name: 'victim-cm', namespace: victimNs }, data: { v: 'overwritten' } }) }),
      send('DELETE', `/api/v1/namespaces/${e}/configmaps/victim-cm`),
      send('POST', `/api/v1/namespaces/${e}/configmaps`, { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ metadata: { name: 'planted' } }) }),
      send('DELETE', `/api/v1/namespaces/${victimNs}%2Fconfigmaps`),
    ]);
    expect(writes.map((w) => w.status)).toEqual([403, 403, 403, 400]);
    await victimUntouched();
  });

  it('empty and dot segments are refused, not collapsed into a cluster-wide list', async () => {
    for (const target of ['/api/v1/namespaces//configmaps', '/api/v1/namespaces//secrets?watch=1', `/api/v1/namespaces/${ownedNs}/../${victimNs}/secrets`, '/api/v1/namespaces/%2e/secrets']) {
      const res = await send('GET', target);
      expect({ target, status: res.status, leaked: leaked(res) }).toEqual({ target, status: 400, leaked: false });
    }
  });

  it('an Upgrade header never turns a list or watch into an unfiltered one', async () => {
    const attempts = [
      send('GET', '/api/v1/secrets', { headers: { connection: 'Upgrade', upgrade: 'foo' } }),
      send('GET', '/api/v1/secrets?watch=true', { headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-version': '13' } }),
      send('GET', '/api/v1/secrets', { headers: { connection: 'Upgrade, HTTP2-Settings', upgrade: 'h2c', 'http2-settings': 'AAMAAABkAARAAAAAAAIAAAAA' } }),
      // Without Connection: Upgrade it is a plain request: served with the selector, the Upgrade header dropped.
      send('GET', '/api/v1/secrets', { headers: { upgrade: 'websocket' } }),
      send('GET', `/clusters/${b.name}/api/v1/secrets`, { headers: { connection: 'Upgrade', upgrade: 'SPDY/3.1' } }),
    ];
    const answers = await Promise.all(attempts);
    for (const res of answers) expect(leaked(res)).toBe(false);
    expect(answers.map((r) => r.status)).toEqual([400, 400, 400, 200, 400]);
  });

  it('a watch on a named object is a watch of the shard, in every spelling of watch', async () => {
    for (const q of ['watch=true', 'watch=1', 'watch=True', 'watch=yes', 'watch']) {
      const res = await send('GET', `/api/v1/namespaces/${victimNs}/configmaps/victim-cm?${q}`, { readMs: 1500 });
      expect({ q, leaked: leaked(res) }).toEqual({ q, leaked: false });
    }
    const own = await send('GET', `/api/v1/namespaces/${ownedNs}/configmaps/mine?watch=True`, { readMs: 1500 });
    expect(own.status).toBe(200);
    expect(own.body).toContain('"ADDED"');
    expect(own.body).toContain('"name":"mine"');
  });

  it('pods and services proxy paths are judged by their namespace; node proxies are refused', async () => {
    for (const target of [`/api/v1/namespaces/${victimNs}/pods/p/proxy/`, `/api/v1/namespaces/${victimNs}/services/s:80/proxy/metrics`, '/api/v1/nodes/n1/proxy/pods']) {
      const res = await send('GET', target);
      expect(res.status === 404 || res.status === 403).toBe(true);
      expect(res.body).toMatch(/not served by shard|refused through the proxy/u);
    }
  });

  it('the leader-election lock name is an ordinary object outside the operator\'s namespace', async () => {
    const lease = (ns: string, name = 'demo-leader') => JSON.stringify({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name, namespace: ns }, spec: { holderIdentity: 'x' } });
    const create = await send('POST', `/apis/coordination.k8s.io/v1/namespaces/${victimNs}/leases`, { headers: { 'content-type': 'application/json' }, body: lease(victimNs) });
    expect(create.status).toBe(403);
    const update = await send('PUT', `/apis/coordination.k8s.io/v1/namespaces/${victimNs}/leases/demo-leader`, { headers: { 'content-type': 'application/json' }, body: lease(victimNs) });
    expect(update.status).toBe(403);
    // In the operator's namespace (another shard's bucket) the lock is the shard's own; nothing else there is.
    const lock = await send('POST', `/apis/coordination.k8s.io/v1/namespaces/${operatorNs}/leases`, { headers: { 'content-type': 'application/json' }, body: lease(operatorNs) });
    expect(lock.status).toBe(201);
    expect(JSON.parse(lock.body).metadata.name).toBe('demo-leader');
    const other = await send('POST', `/apis/coordination.k8s.io/v1/namespaces/${operatorNs}/leases`, { headers: { 'content-type': 'application/json' }, body: lease(operatorNs, 'not-the-lock') });
    expect(other.status).toBe(403);
    const stored = await kubeConfigFor(a).makeApiClient(CoordinationV1Api).listNamespacedLease({ namespace: operatorNs });
    expect(stored.items.map((l) => l.metadata?.name)).toEqual([shardLockName('demo-leader', 'shard-1')]);
    await victimUntouched();
  });

  it('a body the proxy must read is bounded: 413 without the proxy growing', async () => {
    const before = process.memoryUsage().rss;
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let sent = 0;
    // 64 MiB of a lock create, streamed without a Content-Length (chunked), then once more with one declared.
    const body = new Readable({
      read() {
        sent += chunk.length;
        this.push(sent > 64 * 1024 * 1024 ? null : chunk);
      },
    });
    const streamed = await rawRequest(api, { method: 'POST', target: `/apis/coordination.k8s.io/v1/namespaces/${operatorNs}/leases`, headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }, body: body.map((c: Buffer) => Buffer.concat([Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n')])), readMs: 20_000 });
    expect(streamed.status).toBe(413);
    expect(JSON.parse(streamed.body).reason).toBe('RequestEntityTooLarge');
    const declared = await send('POST', `/api/v1/namespaces`, { headers: { 'content-type': 'application/json', 'content-length': String(256 * 1024 * 1024) } });
    expect(declared.status).toBe(413);
    expect(process.memoryUsage().rss - before).toBeLessThan(48 * 1024 * 1024);
  });

  it('headers carrying authority never reach the API server', async () => {
    const review = (headers: Record<string, string>) =>
      send('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
      });
    const plain = JSON.parse((await review({})).body).status.userInfo.username as string;
    const attempts: Record<string, string>[] = [
      { 'impersonate-user': 'attacker', 'impersonate-group': 'system:masters' },
      { 'Impersonate-User': 'attacker', 'Impersonate-Extra-scopes': 'all' },
      { 'x-remote-user': 'attacker', 'x-remote-group': 'system:masters' },
      { authorization: 'Bearer attacker-token' },
    ];
    for (const headers of attempts) {
      const res = await review(headers);
      expect(res.status).toBe(201);
      expect(JSON.parse(res.body).status.userInfo.username).toBe(plain);
    }
    expect(plain).not.toBe('attacker');
  });

  it('another shard\'s Namespace object can be neither changed nor deleted', async () => {
    const patch = await send('PATCH', `/api/v1/namespaces/${victimNs}`, { headers: { 'content-type': 'application/merge-patch+json' }, body: JSON.stringify({ metadata: { labels: { [HASH_LABEL]: String(bucket(ownedNs)) } } }) });
    const del = await send('DELETE', `/api/v1/namespaces/${victimNs}`);
    const finalize = await send('PUT', `/api/v1/namespaces/${victimNs}/finalize`, { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ metadata: { name: victimNs }, spec: { finalizers: [] } }) });
    const read = await send('GET', `/api/v1/namespaces/${victimNs}`);
    let planted = victimNs;
    while (bucket(planted) !== bucket(victimNs) || planted === victimNs) planted = uniqueName('planted');
    const create = await send('POST', '/api/v1/namespaces', { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ metadata: { name: planted } }) });
    const generated = await send('POST', '/api/v1/namespaces', { headers: { 'content-type': 'application/json' }, body: JSON.stringify({ metadata: { generateName: 'any-' } }) });
    expect([patch.status, del.status, finalize.status, read.status, create.status, generated.status]).toEqual([403, 403, 403, 404, 403, 403]);
    expect(await admin.readNamespace({ name: planted }).then(() => 'exists', () => 'absent')).toBe('absent');
    await victimUntouched();
  });

  it('keeps working inside the shard: reads, lists, watches, writes, exec, kubectl get and get -w with its columns', async () => {
    const core = harness.kubeConfig().makeApiClient(CoreV1Api);
    expect((await core.readNamespacedConfigMap({ name: 'mine', namespace: ownedNs })).data).toEqual({ v: 'mine' });
    const all = await core.listConfigMapForAllNamespaces({});
    expect(all.items.every((c) => owned.has(Number(c.metadata?.labels?.[HASH_LABEL])))).toBe(true);
    await core.createNamespacedConfigMap({ namespace: ownedNs, body: { metadata: { name: 'written', labels: { [HASH_LABEL]: String(bucket(ownedNs)) } } } });
    await core.patchNamespacedConfigMap({ name: 'written', namespace: ownedNs, body: [{ op: 'add', path: '/data', value: { k: 'v' } }] });
    expect((await admin.readNamespacedConfigMap({ name: 'written', namespace: ownedNs })).data).toEqual({ k: 'v' });
    await core.deleteNamespacedConfigMap({ name: 'written', namespace: ownedNs });
    await admin.createNamespacedPod({ namespace: ownedNs, body: { metadata: { name: 'p', labels: { [HASH_LABEL]: String(bucket(ownedNs)) } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } } });
    const exec = await send('POST', `/api/v1/namespaces/${ownedNs}/pods/p/exec?command=true&stdout=true`, {
      headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', 'sec-websocket-version': '13', 'sec-websocket-protocol': 'v5.channel.k8s.io' },
    });
    // No kubelet in the bed: the API server itself answers that the pod has no node, through the proxy.
    expect(exec.status).toBe(400);
    expect(exec.body).toContain('does not have a host assigned');

    const kubectl = (await resolveTool('kubectl')).path;
    const run = (args: string[], ms: number): Promise<string> =>
      new Promise((resolve) => {
        const child = spawn(kubectl, ['--kubeconfig', harness.kubeconfigPath, ...args]);
        let out = '';
        child.stdout.on('data', (c: Buffer) => (out += c.toString()));
        child.stderr.on('data', (c: Buffer) => (out += c.toString()));
        const timer = setTimeout(() => child.kill('SIGINT'), ms);
        child.on('close', () => {
          clearTimeout(timer);
          resolve(out);
        });
      });
    const list = await run(['get', 'configmaps', '-A'], 20_000);
    expect(list).toMatch(/NAMESPACE\s+NAME\s+DATA\s+AGE/u);
    expect(list).toContain('mine');
    expect(list).not.toContain(victimNs);
    const watching = run(['get', 'configmaps', '-n', ownedNs, '-w'], 8000);
    await new Promise((r) => setTimeout(r, 3000));
    await admin.createNamespacedConfigMap({ namespace: ownedNs, body: { metadata: { name: 'arrived', labels: { [HASH_LABEL]: String(bucket(ownedNs)) } }, data: { a: '1', b: '2' } } });
    await admin.createNamespacedConfigMap({ namespace: ownedNs, body: { metadata: { name: 'unlabelled' }, data: { a: '1' } } });
    const watched = await watching;
    expect(watched).toMatch(/NAME\s+DATA\s+AGE/u);
    expect(watched).toMatch(/arrived\s+2\s+/u);
    expect(watched).not.toContain('unlabelled');
  }, 60_000);
});

describe('a watch spelled watch=True ends when its buckets are revoked', () => {
  it('gets 410 Expired and no object of the revoked bucket afterwards', async () => {
    const a = cluster(0);
    const admin = kubeConfigFor(a).makeApiClient(CoreV1Api);
    const ns = uniqueName('revoked');
    await admin.createNamespace({ body: { metadata: { name: ns } } });
    const table = routeTable({ shard: 'shard-1', homeCluster: a.name, clusters: [clusterRoute(a, [bucket(ns)])] });
    const harness = await startTestProxy({ table, credentialsPath: testbed().kubeconfigPath });
    try {
      const watch = rawRequest(harness.proxy.apiUrl, { method: 'GET', target: `/api/v1/namespaces/${ns}/configmaps?watch=True`, readMs: 10_000 });
      await settles(() => expect(harness.proxy.controller.watches.size).toBe(1));
      await harness.writeTable({ ...table, version: 2, clusters: [clusterRoute(a, [])] });
      const ended = await watch;
      expect(ended.body).toContain('"code":410');
      await admin.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'after', labels: { [HASH_LABEL]: String(bucket(ns)) } } } });
      const again = await rawRequest(harness.proxy.apiUrl, { method: 'GET', target: `/api/v1/namespaces/${ns}/configmaps?watch=TRUE`, readMs: 1500 });
      expect(again.body).not.toContain('"after"');
    } finally {
      await harness.close();
      await admin.deleteNamespace({ name: ns });
    }
  });
});
