import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentHandle } from '../../src/agent/index.js';
import { resolveTool } from '../../src/dev/index.js';
import type { HubHandle } from '../../src/hub/index.js';
import { NatsRouteSource, liveRulesFromFiles } from '../../src/proxy/index.js';
import type { RouteTable } from '../../src/transport/index.js';
import { GROUP, apply, bootstrapTokens, ensureNamespace, eventually, handWrittenConfig, logger, observe, privateNats, proxyNatsConfig, routeSignerKey, routeTables, runAgent, runHub } from './control-fixture.js';
import { bucket, sharedNamespace, silent, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { cluster, kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

const run = promisify(execFile);
const HASH = 'ctrlmesh.kusionstack.io/sharding-hash';
/** The reference examples' namespace, and the pods' namespace of their rules. */
const NS = 'operator-demo';
const PODS_NS = 'ns-a';
const REFERENCE = '/work/shared/reference/examples';
const POD_NAME = 'operator-demo-0';

type RuleStatus = {
  observedGeneration?: number;
  conditions?: { type: string; status: string; message: string }[];
  proxies?: { operator: string; shard: string; pod: string; generation: number; tableVersion: number }[];
};

/**
 * CircuitBreakers and FaultInjections applied with kubectl to a member cluster, taking effect on the proxy of the
 * pods they select, live: the agent reports them, the hub puts them in the shard's signed route table, the proxy
 * merges them with its (absent) --rules files by its pod's labels, acknowledges them, and the agent writes their status.
 */
describe('cluster rules: CircuitBreaker and FaultInjection from the member cluster, live on the selected proxies', () => {
  const a = cluster(0);
  const b = cluster(1);
  const admin = kubeConfigFor(a);
  const core = admin.makeApiClient(CoreV1Api);
  const custom = admin.makeApiClient(CustomObjectsApi);
  const operator = `${NS}/demo`;
  const shard = `${a.name}/demo`;
  const elsewhere = uniqueName('rules-other');
  const prefix = uniqueName('victim');
  let kubectl = '';
  let dir: string;
  let labelsFile: string;
  let nats: Awaited<ReturnType<typeof privateNats>>;
  let hub: HubHandle;
  const agents: AgentHandle[] = [];
  let observer: NatsConnection;
  let proxy: TestProxy;
  let podIndex = 0;
  const figures: Record<string, number> = {};

  const kubectlOn = (kc: { kubeconfigPath: string }, ...args: string[]) => run(kubectl, ['--kubeconfig', kc.kubeconfigPath, ...args]);
  /** The proxy's ctrlmesh_proxy_rules_in_force children: `<source>:<kind>/<rule>@<generation>`. */
  const inForce = async (harness: TestProxy = proxy): Promise<string[]> => {
    const text = await (await fetch(`${harness.proxy.opsUrl}/metrics`)).text();
    return text
      .split('\n')
      .filter((l) => l.startsWith('ctrlmesh_proxy_rules_in_force{'))
      .map((l) => {
        const label = (name: string): string => new RegExp(`${name}="([^"]*)"`).exec(l)?.[1] ?? '';
        return `${label('source')}:${label('kind')}/${label('rule')}@${label('generation')}`;
      })
      .sort();
  };
  /** Waits until the proxy has exactly `expected` in force; returns how long that took from `since`. */
  const untilInForce = async (expected: string[], since: number): Promise<number> => {
    await eventually(async () => expect(await inForce()).toEqual([...expected].sort()), 30_000, 50);
    return Date.now() - since;
  };
  const status = async (plural: string, name: string): Promise<RuleStatus> =>
    ((await custom.getNamespacedCustomObject({ group: GROUP, version: 'v1alpha1', namespace: NS, plural, name })) as { status?: RuleStatus }).status ?? {};
  const writeLabels = async (text: string): Promise<void> => {
    // As the kubelet does: the new content replaces the file at once.
    await writeFile(`${labelsFile}.tmp`, text);
    await rename(`${labelsFile}.tmp`, labelsFile);
  };
  /** Creates `n` pods in ns-a (never scheduled: deleting one is immediate) and returns their names. */
  const makePods = async (n: number): Promise<string[]> => {
    const names = Array.from({ length: n }, () => `${prefix}-${podIndex++}`);
    for (const name of names) await core.createNamespacedPod({ namespace: PODS_NS, body: { metadata: { name }, spec: { containers: [{ name: 'c', image: 'busybox' }] } } });
    return names;
  };
  /** Deletes the pods through the proxy, one after another; returns each answer's status code. */
  const deleteThrough = async (harness: TestProxy, names: string[]): Promise<number[]> => {
    const codes: number[] = [];
    for (const name of names) {
      const res = await fetch(`${harness.proxy.apiUrl}/api/v1/namespaces/${PODS_NS}/pods/${name}?gracePeriodSeconds=0`, { method: 'DELETE' });
      await res.arrayBuffer();
      codes.push(res.status);
    }
    return codes;
  };
  /** Which of the pods the API server still has: the deletes it executed are the others. */
  const remaining = async (names: string[]): Promise<string[]> => {
    const list = await core.listNamespacedPod({ namespace: PODS_NS });
    const present = new Set((list.items ?? []).map((p) => p.metadata?.name));
    return names.filter((n) => present.has(n));
  };
  /** How long one merge patch of a pod takes through the proxy (ms). */
  const patchMs = async (name: string, i: number): Promise<number> => {
    const started = performance.now();
    const res = await fetch(`${proxy.proxy.apiUrl}/api/v1/namespaces/${PODS_NS}/pods/${name}`, {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: JSON.stringify({ metadata: { annotations: { tick: String(i) } } }),
    });
    await res.arrayBuffer();
    expect(res.status).toBe(200);
    return performance.now() - started;
  };
  const median = (values: number[]): number => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)] as number;
  const table = async (): Promise<RouteTable> => {
    const found = (await routeTables(observer, operator)).find((t) => t.shard === shard);
    if (!found) throw new Error('no route table yet');
    return found;
  };
  const copyOf = async (file: string, edit: (text: string) => string): Promise<string> => {
    const path = join(dir, `${Math.random().toString(36).slice(2)}-${file}`);
    await writeFile(path, edit(await readFile(join(REFERENCE, file), 'utf8')));
    return path;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-cluster-rules-'));
    kubectl = (await resolveTool('kubectl')).path;
    nats = await privateNats();
    hub = await runHub(nats.nats, 'rules-hub', { tokens: bootstrapTokens(a.name, b.name) });
    await eventually(() => expect(hub.isLeader()).toBe(true));
    for (const bed of [a, b]) agents.push(await runAgent({ registryName: bed.name, bed, nats: nats.nats, webhook: undefined }));
    observer = await observe(nats.nats);
    // ns-a is a shared name in the bed (other files use it too): wait out another file's deletion, never delete it.
    await sharedNamespace(core, PODS_NS);
    await ensureNamespace(admin, NS);
    await ensureNamespace(kubeConfigFor(b), NS);
    await ensureNamespace(admin, elsewhere);
    // The operator's one shard owns ns-a's bucket in its home cluster a.
    await eventually(() => apply(admin, handWrittenConfig(NS, 'demo', [String(bucket(PODS_NS))], HASH)));
    await eventually(table, 30_000);
    labelsFile = join(dir, 'labels');
    // The downward API's format: `key="value"` lines, Go-quoted values, sorted by key.
    await writeLabels('app="operator-demo"\nstatefulset.kubernetes.io/pod-name="operator-demo-0"\n');
    const identity = await proxyNatsConfig(nats.nats, operator, shard);
    proxy = await startTestProxy({
      table: undefined,
      credentialsPath: testbed().kubeconfigPath,
      dir: join(dir, 'proxy'),
      source: () => new NatsRouteSource({ nats: identity, trusted: [routeSignerKey(nats.nats)], operator, shard, from: POD_NAME, logger: silent, reackMs: 500 }),
      // As `ctrlmesh proxy --pod-labels FILE` builds it (no --rules files).
      ruleSource: liveRulesFromFiles({ rules: [], podLabels: labelsFile, logger: silent, now: Date.now, pollIntervalMs: 100 }),
    });
    await eventually(async () => expect((await fetch(`${proxy.proxy.opsUrl}/readyz`)).status).toBe(200), 30_000);
  }, 180_000);

  afterAll(async () => {
    for (const kind of ['circuitbreakers', 'faultinjections']) {
      await kubectlOn(a, 'delete', kind, '--all', '-n', NS, '--ignore-not-found', '--wait=false').catch(() => undefined);
      await kubectlOn(a, 'delete', kind, '--all', '-n', elsewhere, '--ignore-not-found', '--wait=false').catch(() => undefined);
      await kubectlOn(b, 'delete', kind, '--all', '-n', NS, '--ignore-not-found', '--wait=false').catch(() => undefined);
    }
    await custom.deleteNamespacedCustomObject({ group: GROUP, version: 'v1alpha1', namespace: NS, plural: 'shardingconfigs', name: 'demo' }).catch(() => undefined);
    await proxy?.close();
    await observer?.close();
    for (const agent of agents) await agent.stop();
    await hub?.stop();
    await nats?.cleanup();
    const list = await core.listNamespacedPod({ namespace: PODS_NS }).catch(() => ({ items: [] }));
    for (const p of list.items ?? []) {
      if (p.metadata?.name?.startsWith(prefix)) await core.deleteNamespacedPod({ name: p.metadata.name, namespace: PODS_NS, gracePeriodSeconds: 0 }).catch(() => undefined);
    }
    await core.deleteNamespace({ name: elsewhere }).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
    // The figures this run measured (ms), for the record.
    console.log(`cluster-rules figures: ${JSON.stringify(figures)}`);
  });

  it('the example CircuitBreaker limits pod deletes within seconds of kubectl apply, changes when edited, stops when deleted', async () => {
    expect(await inForce()).toEqual([]);
    const victims = await makePods(14);
    const applied = Date.now();
    await kubectlOn(a, 'apply', '-f', join(REFERENCE, 'circuit-breaker.yaml'));
    figures.breakerApplyToEffectMs = await untilInForce(['cluster:CircuitBreaker/demo-breaker@1'], applied);
    // "deletes": burst 10, Normal trigger: ten deletes pass, the rest find the breaker open (KusionStack's 417).
    const codes = await deleteThrough(proxy, victims);
    expect(codes).toEqual([...Array(10).fill(200), 417, 417, 417, 417]);
    // By effect: the API server executed exactly the ten deletes the proxy let through.
    expect(await remaining(victims)).toEqual(victims.slice(10));

    // The status names the shard, the pod and the generation its proxy applied, with the table it came in.
    const withProxy = await eventually(async () => {
      const s = await status('circuitbreakers', 'demo-breaker');
      expect(s.proxies).toEqual([{ operator, shard, pod: POD_NAME, generation: 1, tableVersion: proxy.proxy.controller.current?.table.version }]);
      return s;
    }, 30_000);
    expect(withProxy.observedGeneration).toBe(1);
    expect(withProxy.conditions?.find((c) => c.type === 'Accepted')?.status).toBe('True');
    figures.breakerApplyToStatusMs = Date.now() - applied;

    // Edited (kubectl apply, bucket burst 3): a new generation, in force with a full bucket of 3.
    const edited = await copyOf('circuit-breaker.yaml', (text) => text.replace('burst: 10', 'burst: 3'));
    const editedAt = Date.now();
    await kubectlOn(a, 'apply', '-f', edited);
    figures.breakerEditToEffectMs = await untilInForce(['cluster:CircuitBreaker/demo-breaker@2'], editedAt);
    const more = await makePods(5);
    expect(await deleteThrough(proxy, more)).toEqual([200, 200, 200, 417, 417]);
    expect(await remaining(more)).toEqual(more.slice(3));
    await eventually(async () => expect((await status('circuitbreakers', 'demo-breaker')).proxies?.map((p) => p.generation)).toEqual([2]), 30_000);

    // The pod's labels change (the kubelet rewrites the file): the rule no longer selects it; the proxy acknowledges
    // its table again without the rule, and the status no longer lists it. Labelled back, the rule applies again.
    await writeLabels('app="paused"\n');
    await untilInForce([], Date.now());
    await eventually(async () => expect((await status('circuitbreakers', 'demo-breaker')).proxies).toEqual([]), 30_000);
    await writeLabels('app="operator-demo"\n');
    await untilInForce(['cluster:CircuitBreaker/demo-breaker@2'], Date.now());
    await eventually(async () => expect((await status('circuitbreakers', 'demo-breaker')).proxies?.map((p) => p.pod)).toEqual([POD_NAME]), 30_000);

    // kubectl delete: gone from the proxy, every delete passes again.
    const deletedAt = Date.now();
    await kubectlOn(a, 'delete', '-f', edited);
    figures.breakerDeleteToEffectMs = await untilInForce([], deletedAt);
    const rest = [...victims.slice(10), ...more.slice(3)];
    expect(await deleteThrough(proxy, rest)).toEqual(rest.map(() => 200));
    expect(await remaining(rest)).toEqual([]);
  }, 120_000);

  it('the example FaultInjection (percent "100" in an edited copy) delays pod patches in ns-a, until deleted', async () => {
    const [target] = await makePods(1);
    const before: number[] = [];
    for (let i = 0; i < 5; i++) before.push(await patchMs(target as string, i));
    const faults = await copyOf('fault-injection.yaml', (text) => text.replace('percent: "50"', 'percent: "100"'));
    const appliedAt = Date.now();
    await kubectlOn(a, 'apply', '-f', faults);
    figures.faultApplyToEffectMs = await untilInForce(['cluster:FaultInjection/demo-faults@1'], appliedAt);
    const during: number[] = [];
    for (let i = 0; i < 5; i++) during.push(await patchMs(target as string, 10 + i));
    // slow-pod-updates: a fixed 200ms on every patch of a pod in ns-a.
    expect(Math.min(...during)).toBeGreaterThanOrEqual(200);
    expect(median(during) - median(before)).toBeGreaterThanOrEqual(150);
    figures.patchMedianBeforeMs = Math.round(median(before));
    figures.patchMedianWithFaultMs = Math.round(median(during));
    await eventually(async () => expect((await status('faultinjections', 'demo-faults')).proxies?.map((p) => [p.pod, p.generation])).toEqual([[POD_NAME, 1]]), 30_000);

    const deletedAt = Date.now();
    await kubectlOn(a, 'delete', '-f', faults);
    figures.faultDeleteToEffectMs = await untilInForce([], deletedAt);
    const after: number[] = [];
    for (let i = 0; i < 5; i++) after.push(await patchMs(target as string, 20 + i));
    expect(median(after)).toBeLessThan(median(during) - 150);
  }, 90_000);

  it('a rule with an invalid field gets a condition naming it and changes nothing on the proxy', async () => {
    const badBreaker = await copyOf('circuit-breaker.yaml', (text) => text.replace('name: demo-breaker', 'name: bad-breaker').replace("'^https://prod\\..*'", "'^https://(prod'"));
    const badFaults = await copyOf('fault-injection.yaml', (text) => text.replace('name: demo-faults', 'name: bad-faults').replace('percent: "50"', 'percent: "150"'));
    await kubectlOn(a, 'apply', '-f', badBreaker);
    await kubectlOn(a, 'apply', '-f', badFaults);
    const breaker = await eventually(async () => {
      const s = await status('circuitbreakers', 'bad-breaker');
      expect(s.conditions?.find((c) => c.type === 'Invalid')?.status).toBe('True');
      return s;
    }, 30_000);
    expect(breaker.conditions?.find((c) => c.type === 'Invalid')?.message).toMatch(/^spec\.trafficInterceptRules\[0\]\.contents\[0\]: not a valid regular expression/);
    expect(breaker.conditions?.find((c) => c.type === 'Accepted')?.status).toBe('False');
    const faults = await eventually(async () => {
      const s = await status('faultinjections', 'bad-faults');
      expect(s.conditions?.find((c) => c.type === 'Invalid')?.status).toBe('True');
      return s;
    }, 30_000);
    expect(faults.conditions?.find((c) => c.type === 'Invalid')?.message).toBe('spec.httpFault[0].delay.percent: must be from 0 to 100, not "150"');
    // A valid rule applied after them reaches the proxy; the invalid ones never do (nor the table), and no proxy lists them.
    const probe = await copyOf('circuit-breaker.yaml', (text) => text.replace('name: demo-breaker', 'name: probe-breaker'));
    await kubectlOn(a, 'apply', '-f', probe);
    await untilInForce(['cluster:CircuitBreaker/probe-breaker@1'], Date.now());
    expect((await table()).rules?.map((r) => r.name)).toEqual(['probe-breaker']);
    expect((await status('circuitbreakers', 'bad-breaker')).proxies).toEqual([]);
    await kubectlOn(a, 'delete', '-f', probe);
    await kubectlOn(a, 'delete', '-f', badBreaker);
    await kubectlOn(a, 'delete', '-f', badFaults);
    await untilInForce([], Date.now());
  }, 90_000);

  it("a proxy whose pod's labels do not match applies nothing of the same table", async () => {
    await kubectlOn(a, 'apply', '-f', join(REFERENCE, 'circuit-breaker.yaml'));
    // Created again after its deletion: the API server starts its generation at 1 again.
    await untilInForce(['cluster:CircuitBreaker/demo-breaker@1'], Date.now());
    const current = proxy.proxy.controller.current?.table as RouteTable;
    expect(current.rules?.map((r) => r.name)).toEqual(['demo-breaker']);
    const otherLabels = join(dir, 'other-labels');
    await writeFile(otherLabels, 'app="someone-else"\n');
    // The same signed table, served from a file: only the pod's labels differ.
    const other = await startTestProxy({
      table: current,
      credentialsPath: testbed().kubeconfigPath,
      dir: join(dir, 'other-proxy'),
      ruleSource: liveRulesFromFiles({ rules: [], podLabels: otherLabels, logger: silent, now: Date.now }),
    });
    try {
      await eventually(() => expect(other.proxy.controller.current?.table.version).toBe(current.version));
      expect(await inForce(other)).toEqual([]);
      const victims = await makePods(12);
      expect(await deleteThrough(other, victims)).toEqual(victims.map(() => 200));
      expect(await remaining(victims)).toEqual([]);
    } finally {
      await other.close();
    }
    await kubectlOn(a, 'delete', '-f', join(REFERENCE, 'circuit-breaker.yaml'));
    await untilInForce([], Date.now());
  }, 90_000);

  it("an attacker's rule in another namespace, or in another cluster, never reaches this shard's table", async () => {
    const everyone = (name: string, namespace: string): string =>
      [
        'apiVersion: ctrlmesh.kusionstack.io/v1alpha1',
        'kind: CircuitBreaker',
        `metadata: { name: ${name}, namespace: ${namespace} }`,
        'spec:',
        '  rateLimitings:',
        '  - name: no-deletes',
        "    resourceRules: [{ apiGroups: [''], resources: [pods], verbs: [delete], namespaces: ['*'] }]",
        '    bucket: { burst: 0, interval: 1h, limit: 0 }',
        '    triggerPolicy: ForceOpened',
        '',
      ].join('\n');
    const inOther = join(dir, 'attacker-namespace.yaml');
    const inB = join(dir, 'attacker-cluster.yaml');
    await writeFile(inOther, everyone('attacker', elsewhere));
    await writeFile(inB, everyone('attacker', NS));
    await kubectlOn(a, 'apply', '-f', inOther);
    await kubectlOn(b, 'apply', '-f', inB);
    // The control: a rule of the operator's namespace in its home cluster, applied last, does arrive.
    const control = join(dir, 'control.yaml');
    await writeFile(control, everyone('control', NS).replace('burst: 0, interval: 1h, limit: 0', 'burst: 100, interval: 1h, limit: 100').replace('ForceOpened', 'LimiterOnly'));
    await kubectlOn(a, 'apply', '-f', control);
    await untilInForce(['cluster:CircuitBreaker/control@1'], Date.now());
    // Both agents reported theirs (their statuses are written), and neither is in the table or in force.
    await eventually(async () => {
      const other = (await custom.getNamespacedCustomObject({ group: GROUP, version: 'v1alpha1', namespace: elsewhere, plural: 'circuitbreakers', name: 'attacker' })) as { status?: RuleStatus };
      expect(other.status?.conditions?.find((c) => c.type === 'Accepted')?.status).toBe('True');
      const inClusterB = (await kubeConfigFor(b)
        .makeApiClient(CustomObjectsApi)
        .getNamespacedCustomObject({ group: GROUP, version: 'v1alpha1', namespace: NS, plural: 'circuitbreakers', name: 'attacker' })) as { status?: RuleStatus };
      expect(inClusterB.status?.conditions?.find((c) => c.type === 'Accepted')?.status).toBe('True');
      expect(inClusterB.status?.proxies).toEqual([]);
    }, 30_000);
    expect((await table()).rules?.map((r) => `${r.namespace}/${r.name}`)).toEqual([`${NS}/control`]);
    expect(await inForce()).toEqual(['cluster:CircuitBreaker/control@1']);
    const victims = await makePods(2);
    expect(await deleteThrough(proxy, victims)).toEqual([200, 200]);
    await kubectlOn(a, 'delete', '-f', control);
    await untilInForce([], Date.now());
    // The proxy served all along: one process, one controller, tables applied live.
    expect(proxy.proxy.controller.current?.table.version).toBeGreaterThan(0);
    logger.info({ figures }, 'cluster rules');
  }, 90_000);
});
