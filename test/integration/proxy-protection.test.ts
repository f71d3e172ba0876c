import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveTool, startApiServer, writeKubeconfig, type ApiServerHandle } from '../../src/dev/index.js';
import { createRegistry, createProxyMetrics } from '../../src/metrics/index.js';
import { judge, loadRules, startEgressProxy } from '../../src/proxy/index.js';
import { HASH_LABEL, bucket, clusterRoute, code, metricValue, routeTable, settles, sharedNamespace, silent, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { cluster, kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

// The reference examples, as copied into the repository (test/unit/api/examples) from shared/reference/examples.
const EXAMPLES = new URL('../unit/api/examples/', import.meta.url).pathname;

describe('a cluster breaker in front of an API server that stops', () => {
  let privateServer: ApiServerHandle;
  let harness: TestProxy;
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-breaker-'));
    privateServer = await startApiServer({ etcd: testbed().etcd, name: uniqueName('private'), dir: join(dir, 'server'), logger: silent });
    const a = cluster(0);
    const table = routeTable({ shard: 'shard-1', homeCluster: a.name, clusters: [clusterRoute(a, [0, 1, 2]), clusterRoute(privateServer, [0, 1, 2])] });
    // The proxy's credentials: one context per cluster name, the bed's cluster and the private one.
    const credentialsPath = join(dir, 'credentials');
    await writeKubeconfig(credentialsPath, [a, privateServer]);
    harness = await startTestProxy({ table, credentialsPath, dir: join(dir, 'proxy') });
  }, 120_000);

  afterAll(async () => {
    await harness?.close();
    await privateServer?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('fails fast with 503 once open, leaves the other cluster alone, and closes when the server is back', async () => {
    const proxied = (name: string): CoreV1Api => harness.kubeConfig(name).makeApiClient(CoreV1Api);
    expect(await code(proxied(privateServer.name).listNamespace())).toBe(200);
    await privateServer.stop();
    const answers: { status: number; body: string; retryAfter: string | null }[] = [];
    for (let i = 0; i < 8; i++) {
      // Lists and sharded watches alike: a watch takes the watch path (watch-path.ts), which answers the same.
      const path = i % 2 === 0 ? 'namespaces' : 'configmaps?watch=1';
      const res = await fetch(`${harness.proxy.apiUrl}/clusters/${privateServer.name}/api/v1/${path}`);
      answers.push({ status: res.status, body: await res.text(), retryAfter: res.headers.get('retry-after') });
    }
    expect(answers.every((a) => a.status === 503 && (JSON.parse(a.body) as { kind: string }).kind === 'Status')).toBe(true);
    const open = answers.filter((a) => a.body.includes('circuit breaker is open'));
    expect(open.length).toBeGreaterThanOrEqual(4);
    expect(open.every((a) => a.retryAfter === '1')).toBe(true);
    expect(await code(proxied(cluster(0).name).listNamespace())).toBe(200);
    expect(await metricValue(harness, 'ctrlmesh_proxy_breaker_state', { cluster: privateServer.name })).toBe(2);

    await privateServer.start();
    await settles(async () => expect(await code(proxied(privateServer.name).listNamespace())).toBe(200), 30_000);
    expect(await metricValue(harness, 'ctrlmesh_proxy_breaker_state', { cluster: privateServer.name })).toBe(0);
  }, 90_000);
});

describe('a proxy started while its route source is down', () => {
  it('serves the table it stored last time', async () => {
    const a = cluster(0);
    const dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-stored-'));
    const ns = uniqueName('stored');
    const admin = kubeConfigFor(a).makeApiClient(CoreV1Api);
    await admin.createNamespace({ body: { metadata: { name: ns } } });
    await admin.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'kept', labels: { [HASH_LABEL]: String(bucket(ns)) } } } });
    const table = routeTable({ shard: 'shard-1', homeCluster: a.name, clusters: [clusterRoute(a, [bucket(ns)])] });
    const first = await startTestProxy({ table, credentialsPath: testbed().kubeconfigPath, dir });
    await settles(async () => expect((await first.proxy.controller.current?.table.version) ?? 0).toBe(1));
    await first.close();
    await rm(first.tablePath);

    // No route table file now (the hub's side is down): the proxy falls back to its store.
    const second = await startTestProxy({ table: undefined, credentialsPath: testbed().kubeconfigPath, dir });
    try {
      expect(second.proxy.controller.readiness()).toEqual({ ready: true, reasons: [] });
      const res = await fetch(`${second.proxy.apiUrl}/api/v1/namespaces/${ns}/configmaps/kept`);
      expect(res.status).toBe(200);
      // Other files share the bed and may have objects in the same bucket: judge the list by its labels.
      type Item = { metadata: { name: string; namespace: string; labels?: Record<string, string> } };
      const list = (await (await fetch(`${second.proxy.apiUrl}/api/v1/configmaps`)).json()) as { items: Item[] };
      expect(list.items.map((i) => i.metadata.labels?.[HASH_LABEL])).toEqual(list.items.map(() => String(bucket(ns))));
      expect(list.items.map((i) => `${i.metadata.namespace}/${i.metadata.name}`)).toContain(`${ns}/kept`);
    } finally {
      await second.close();
      await admin.deleteNamespace({ name: ns });
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('the reference CircuitBreaker and FaultInjection examples', () => {
  const a = cluster(0);
  const admin = kubeConfigFor(a).makeApiClient(CoreV1Api);
  const files = [join(EXAMPLES, 'circuit-breaker.yaml'), join(EXAMPLES, 'fault-injection.yaml')];
  // ns-a is where the example's slow-pod-updates rule applies; its KusionStack bucket is 15.
  const ns = 'ns-a';
  const prefix = uniqueName('p');
  const pod = (i: number): string => `${prefix}-${i}`;
  let harness: TestProxy;
  let clock = Date.parse('2026-11-20T10:00:00Z'); // a Friday, inside flaky-external's 09:00-18:00 weekdays
  let roll = 0.1;

  beforeAll(async () => {
    // ns-a is a shared name in the bed (other files use it too): wait out another file's deletion, never delete it.
    await sharedNamespace(admin, ns);
    for (let i = 0; i < 12; i++) {
      await admin.createNamespacedPod({ namespace: ns, body: { metadata: { name: pod(i), labels: { [HASH_LABEL]: '15' } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } } });
    }
    const rules = await loadRules(files, clock);
    harness = await startTestProxy({
      table: routeTable({ shard: 'shard-1', homeCluster: a.name, clusters: [clusterRoute(a, [bucket(ns)])] }),
      credentialsPath: testbed().kubeconfigPath,
      rules,
      now: () => clock,
      random: () => roll,
    });
  });

  afterAll(async () => {
    await harness?.close();
    for (let i = 0; i < 12; i++) await admin.deleteNamespacedPod({ name: pod(i), namespace: ns, gracePeriodSeconds: 0 }).catch(() => undefined);
  });

  it('"deletes": 10 pod deletes pass, then the breaker opens (417) for the 5m sleeping window', async () => {
    const core = harness.kubeConfig().makeApiClient(CoreV1Api);
    const codes: number[] = [];
    for (let i = 0; i < 12; i++) codes.push(await code(core.deleteNamespacedPod({ name: pod(i), namespace: ns, gracePeriodSeconds: 0 })));
    expect(codes.slice(0, 10)).toEqual(Array(10).fill(200));
    expect(codes.slice(10)).toEqual([417, 417]);
    clock += 4 * 60_000;
    expect(await code(core.deleteNamespacedPod({ name: pod(10), namespace: ns, gracePeriodSeconds: 0 }))).toBe(417);
    clock += 61_000;
    expect(await code(core.deleteNamespacedPod({ name: pod(10), namespace: ns, gracePeriodSeconds: 0 }))).toBe(200);
  });

  it('"slow-pod-updates": a pod patch in ns-a is delayed when its 50% roll hits, not otherwise', async () => {
    const core = harness.kubeConfig().makeApiClient(CoreV1Api);
    const delayed = async (): Promise<number> =>
      (await metricValue(harness, 'ctrlmesh_proxy_faults_injected_total', { rule: 'slow-pod-updates', fault: 'delay' })) ?? 0;
    const patch = () => core.readNamespacedPod({ name: pod(11), namespace: ns }).then((found) => core.replaceNamespacedPod({ name: pod(11), namespace: ns, body: found }));
    roll = 0.9;
    await patch();
    expect(await delayed()).toBe(0);
    roll = 0.1;
    await patch();
    expect(await delayed()).toBe(1);
  });

  it('external REST calls: flaky-external aborts (503) in its window; no-prod-writes (403); payment-api (429 after 5)', async () => {
    const metrics = createProxyMetrics(createRegistry('proxy'));
    const rules = await loadRules(files, clock);
    const egress = await startEgressProxy({ listen: { host: '127.0.0.1', port: 0 }, rules: () => rules, clock: { now: () => clock, random: () => 0.05 }, metrics, logger: silent });
    try {
      // An aborted call never leaves the proxy, so the example's host is never contacted.
      const proxyUrl = new URL(egress.url);
      const status = await new Promise<number>((done, fail) => {
        const req = request(
          { host: proxyUrl.hostname, port: proxyUrl.port, method: 'POST', path: 'http://payments.example.internal/v1/pay', headers: { host: 'payments.example.internal' } },
          (res) => {
            res.resume();
            done(res.statusCode ?? 0);
          },
        );
        req.on('error', fail);
        req.end();
      });
      expect(status).toBe(503);
    } finally {
      await egress.close();
    }
    // These rules name https URLs, which reach the egress proxy only as CONNECT tunnels judged by host; their
    // URL rules are shown here on the rule engine the egress proxy uses, so no call leaves the machine.
    const saturday = { now: () => Date.parse('2026-11-21T10:00:00Z'), random: () => 0.05 };
    const call = (method: string, url: string) => ({ kind: 'rest' as const, method, host: new URL(url).hostname, path: new URL(url).pathname, url });
    expect(judge(rules, call('POST', 'https://prod.example.internal/orders'), saturday, metrics)).toMatchObject({ action: 'deny', code: 403 });
    expect(judge(rules, call('GET', 'https://prod.example.internal/orders'), saturday, metrics).action).toBe('pass');
    const pay = call('POST', 'https://payments.example.internal/v1/pay');
    const outcomes = Array.from({ length: 6 }, () => judge(rules, pay, saturday, metrics));
    expect(outcomes.slice(0, 5).every((o) => o.action === 'pass')).toBe(true);
    expect(outcomes[5]).toMatchObject({ action: 'deny', code: 429, retryAfterSeconds: 1 });
  });
});

describe('a CircuitBreaker rate limiting that names pods/exec', () => {
  const a = cluster(0);
  const admin = kubeConfigFor(a).makeApiClient(CoreV1Api);
  const ns = uniqueName('exec');
  let harness: TestProxy;
  let dir: string;
  let kubectl: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-exec-rule-'));
    kubectl = (await resolveTool('kubectl')).path;
    await admin.createNamespace({ body: { metadata: { name: ns } } });
    await admin.createNamespacedPod({ namespace: ns, body: { metadata: { name: 'shell', labels: { [HASH_LABEL]: String(bucket(ns)) } }, spec: { containers: [{ name: 'c', image: 'busybox' }] } } });
    const file = join(dir, 'exec-limit.yaml');
    await writeFile(
      file,
      [
        'apiVersion: ctrlmesh.kusionstack.io/v1alpha1',
        'kind: CircuitBreaker',
        'metadata: { name: exec-limit, namespace: operator-demo }',
        'spec:',
        '  rateLimitings:',
        '  - name: exec',
        "    resourceRules: [{ apiGroups: [''], resources: [pods/exec], verbs: ['*'], namespaces: ['*'] }]",
        '    bucket: { burst: 1, interval: 1h, limit: 1 }',
        '    triggerPolicy: LimiterOnly',
        '',
      ].join('\n'),
    );
    harness = await startTestProxy({
      table: routeTable({ shard: 'shard-1', homeCluster: a.name, clusters: [clusterRoute(a, [bucket(ns)])] }),
      credentialsPath: testbed().kubeconfigPath,
      rules: await loadRules([file], Date.now()),
      dir: join(dir, 'proxy'),
    });
  }, 60_000);

  afterAll(async () => {
    await harness?.close();
    await admin.deleteNamespace({ name: ns }).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  it("limits kubectl exec through the proxy, upgraded as kubectl sends it, and leaves the pod's other requests alone", async () => {
    const run = (...args: string[]): Promise<string> =>
      promisify(execFile)(kubectl, ['--kubeconfig', harness.kubeconfigPath, '-n', ns, ...args], { timeout: 30_000 }).then(
        (ok) => ok.stdout + ok.stderr,
        (err: { stdout?: string; stderr?: string }) => `${err.stdout ?? ''}${err.stderr ?? ''}`,
      );
    // kubectl tries a WebSocket first, which takes the rule's one token (the API server answers it: no node runs the
    // pod), then SPDY, which the rule refuses: kubectl shows the proxy's Status as the API server's own.
    expect(await run('exec', 'shell', '--', 'true')).toContain('Error from server (TooManyRequests): rate limit "exec" exceeded');
    expect(await run('exec', 'shell', '--', 'true')).toContain('rate limit "exec" exceeded');
    // Another subresource of the pod, and the pod itself, are not limited.
    expect(await run('logs', 'shell')).not.toContain('rate limit');
    expect(await run('get', 'pod', 'shell', '-o', 'name')).toContain('pod/shell');
  }, 90_000);
});
