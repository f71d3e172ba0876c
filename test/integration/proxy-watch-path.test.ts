import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request, type IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadRules } from '../../src/proxy/index.js';
import { HASH_LABEL, bucket, clusterRoute, metricValue, namespaceOutside, routeTable, settles, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { cluster, kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

/** A watch opened on a proxy: its status, the text read so far, and its end. */
interface OpenWatch {
  status: number;
  text: () => string;
  close: () => void;
}

/** Opens `path` on the proxy as a raw GET, with `body` when given (Content-Length and all), and reads as it comes. */
function openWatch(harness: TestProxy, path: string, body?: string): Promise<OpenWatch> {
  return new Promise((resolve, reject) => {
    const req = request(`${harness.proxy.apiUrl}${path}`, { method: 'GET', headers: body === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } });
    req.on('error', reject);
    req.on('response', (res: IncomingMessage) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('error', () => undefined);
      resolve({ status: res.statusCode ?? 0, text: () => text, close: () => req.destroy() });
    });
    req.end(body);
  });
}

/**
 * The watch path (src/proxy/request/watch-path.ts) takes a sharded watch sent as an HTTP/2 stream before fastify, and
 * leaves every other request, and every watch it would refuse, to the API handler. Judged by effect on a real API
 * server: what each watch's client reads and is answered, and what the proxy counts (once per request).
 */
describe('the watch path', () => {
  const a = cluster(0);
  const admin = kubeConfigFor(a).makeApiClient(CoreV1Api);
  const owned = uniqueName('wp-own');
  const other = namespaceOutside('wp-other', new Set([bucket(owned)]));
  let dir: string;
  let harness: TestProxy;
  let ruled: TestProxy;

  const configMap = (namespace: string, name: string) =>
    admin.createNamespacedConfigMap({ namespace, body: { metadata: { name, labels: { [HASH_LABEL]: String(bucket(namespace)) } } } });
  const watchCount = async (proxy: TestProxy, code: number): Promise<number> =>
    (await metricValue(proxy, 'ctrlmesh_proxy_requests_total', { cluster: a.name, verb: 'watch', resource: 'configmaps', code: String(code) })) ?? 0;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-watch-path-'));
    for (const namespace of [owned, other]) {
      await admin.createNamespace({ body: { metadata: { name: namespace, labels: { [HASH_LABEL]: String(bucket(namespace)) } } } });
    }
    const table = routeTable({ shard: 'shard-1', homeCluster: a.name, clusters: [clusterRoute(a, [bucket(owned)])] });
    harness = await startTestProxy({ table, credentialsPath: testbed().kubeconfigPath, dir: join(dir, 'plain') });
    // A rule in force: every watch of this proxy goes to the handler, which judges it by the rule first.
    const rules = join(dir, 'faults.yaml');
    await writeFile(
      rules,
      [
        'apiVersion: ctrlmesh.kusionstack.io/v1alpha1',
        'kind: FaultInjection',
        'metadata: {name: no-watches, namespace: default}',
        'spec:',
        '  selector: {matchLabels: {app: operator}}',
        '  httpFault:',
        '  - name: no-configmap-watches',
        '    abort: {httpStatus: 429, percent: "100"}',
        '    match:',
        '      resources:',
        `      - {apiGroups: [''], resources: [configmaps], verbs: [watch], namespaces: [${owned}]}`,
        '',
      ].join('\n'),
    );
    ruled = await startTestProxy({ table, credentialsPath: testbed().kubeconfigPath, dir: join(dir, 'ruled'), rules: await loadRules([rules], Date.now()) });
  }, 60_000);

  afterAll(async () => {
    await harness?.close();
    await ruled?.close();
    for (const namespace of [owned, other]) await admin.deleteNamespace({ name: namespace }).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  it('a cluster-wide watch reads only the shard\'s objects, taken by the path, or with a body by the handler; each counted once', async () => {
    const before = await watchCount(harness, 200);
    const resourceVersion = (await admin.listNamespacedConfigMap({ namespace: owned })).metadata?.resourceVersion;
    const path = `/api/v1/configmaps?watch=1&resourceVersion=${resourceVersion}`;
    const watches = [await openWatch(harness, path), await openWatch(harness, path, '{}')];
    try {
      expect(watches.map((w) => w.status)).toEqual([200, 200]);
      await configMap(other, 'not-ours');
      await configMap(owned, 'ours');
      await settles(() => expect(watches.map((w) => w.text().includes('"name":"ours"'))).toEqual([true, true]));
      // Events come in order: the unowned object's, created first, would have come before.
      for (const watch of watches) expect(watch.text()).not.toContain('not-ours');
      expect(await watchCount(harness, 200)).toBe(before + 2);
    } finally {
      for (const watch of watches) watch.close();
    }
  }, 30_000);

  it("an unowned namespace's watch reads none of its objects, whatever the client selects; a bad selector is refused once, by the handler", async () => {
    const refusedBefore = await watchCount(harness, 400);
    const bad = await openWatch(harness, '/api/v1/configmaps?watch=1&labelSelector=a%20in%20(b');
    bad.close();
    expect(bad.status).toBe(400);
    expect(await watchCount(harness, 400)).toBe(refusedBefore + 1);
    const resourceVersion = (await admin.listNamespacedConfigMap({ namespace: other })).metadata?.resourceVersion;
    const unowned = [
      await openWatch(harness, `/api/v1/namespaces/${other}/configmaps?watch=1&resourceVersion=${resourceVersion}&labelSelector=app%3Dx`),
      // A watch named by its path, as the API server still serves it.
      await openWatch(harness, `/api/v1/watch/namespaces/${other}/configmaps?resourceVersion=${resourceVersion}`),
    ];
    const everything = await openWatch(harness, `/api/v1/configmaps?watch=1&resourceVersion=${resourceVersion}`);
    try {
      expect([...unowned, everything].map((w) => w.status)).toEqual([200, 200, 200]);
      await admin.createNamespacedConfigMap({ namespace: other, body: { metadata: { name: 'selected', labels: { app: 'x', [HASH_LABEL]: String(bucket(other)) } } } });
      await configMap(owned, 'after-it');
      // Events come in order: the unowned object's, created first, would have come before the owned one's.
      await settles(() => expect(everything.text()).toContain('"name":"after-it"'));
      for (const watch of [...unowned, everything]) expect(watch.text()).not.toContain('"name":"selected"');
    } finally {
      for (const watch of [...unowned, everything]) watch.close();
    }
  }, 30_000);

  it('a watch under a rule in force is judged by the rule first: its abort answers, a watch it does not match is forwarded', async () => {
    const aborted = await openWatch(ruled, `/api/v1/namespaces/${owned}/configmaps?watch=1`);
    aborted.close();
    expect(aborted.status).toBe(429);
    expect(await metricValue(ruled, 'ctrlmesh_proxy_faults_injected_total', { rule: 'no-configmap-watches', fault: 'abort' })).toBe(1);
    const resourceVersion = (await admin.listNamespacedSecret({ namespace: owned })).metadata?.resourceVersion;
    const secrets = await openWatch(ruled, `/api/v1/secrets?watch=1&resourceVersion=${resourceVersion}`);
    try {
      expect(secrets.status).toBe(200);
      await admin.createNamespacedSecret({ namespace: other, body: { metadata: { name: 'not-ours', labels: { [HASH_LABEL]: String(bucket(other)) } } } });
      await admin.createNamespacedSecret({ namespace: owned, body: { metadata: { name: 'ours', labels: { [HASH_LABEL]: String(bucket(owned)) } } } });
      await settles(() => expect(secrets.text()).toContain('"name":"ours"'));
      expect(secrets.text()).not.toContain('not-ours');
    } finally {
      secrets.close();
    }
  }, 30_000);
});
