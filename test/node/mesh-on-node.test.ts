import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, PatchStrategy, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INJECT_PATH, PROXY_SECRET_KEYS } from '../../src/agent/index.js';
import { startNodeBed, type NodeBed } from '../../src/dev/index.js';
import type { HubStatus } from '../../src/hub/index.js';
import { RECONCILED_BY } from '../../src/sample-operator/reconciler.js';
import { eventually } from '../integration/control-fixture.js';
import { applyAll, clients, deleteIfPresent, isReady, podLog, readyPods, type Clients } from './kube.js';
import { putOperatorSecret } from './proxy-secret.js';
import { credentialsAccount, operatorAccess, rootConfig, statefulSet, type OperatorSpec } from './operators.js';
import { fooCrd } from './sample-controller.js';

const HASH_LABEL = 'ctrlmesh.kusionstack.io/sharding-hash';
const WORKLOAD_NAMESPACES = 8;
const PROXY = 'ctrlmesh-proxy';

/** One reconcile of the sample operator (--timestamps; one cluster, so no `cluster=`). */
interface Reconcile {
  pod: string;
  key: string;
  started: number;
  finished: number;
}
const RECONCILED = /^reconciled (\S+) shard=(\S+) started=(\d+) finished=(\d+) wrote=(?:true|false)$/;

function reconciles(log: string): Reconcile[] {
  return log.split('\n').flatMap((line) => {
    const m = RECONCILED.exec(line.trim());
    return m ? [{ key: m[1] as string, pod: m[2] as string, started: Number(m[3]), finished: Number(m[4]) }] : [];
  });
}

/** Pairs of reconciles of one object by two pods whose intervals overlap: two owners at once. */
function overlaps(records: readonly Reconcile[]): string[] {
  const byKey = new Map<string, Reconcile[]>();
  for (const r of records) byKey.set(r.key, [...(byKey.get(r.key) ?? []), r]);
  const found: string[] = [];
  for (const [key, list] of byKey) {
    const sorted = [...list].sort((a, b) => a.started - b.started);
    sorted.forEach((a, i) => {
      for (const b of sorted.slice(i + 1)) {
        if (b.started > a.finished) break;
        if (b.pod !== a.pod) found.push(`${key}: ${a.pod} [${a.started}, ${a.finished}] and ${b.pod} [${b.started}, ${b.finished}]`);
      }
    });
  }
  return found;
}

describe('the mesh on a real node: helm-installed, injected, sharded operators in pods', () => {
  let dir: string;
  let bed: NodeBed;
  let c: Clients;
  const workloads = Array.from({ length: WORKLOAD_NAMESPACES }, (_, i) => `work-${i}`);

  const demo = (image: string): OperatorSpec => ({
    namespace: 'op-demo',
    name: 'sample-operator',
    prefix: 'demo',
    image,
    command: ['/usr/local/bin/node', '/app/dist/src/sample-operator/main.js'],
    args: ['--kubeconfig=/dev/null', '--shard=$(POD_NAME)', '--selector=app=demo', '--timestamps'],
    resources: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch', 'patch', 'update'] }],
  });
  const foo = (image: string): OperatorSpec => ({
    namespace: 'op-foo',
    name: 'sample-controller',
    prefix: 'foo',
    image,
    // The upstream binary, unmodified: the injection points its -kubeconfig flag at the proxy.
    args: ['--kubeconfig=/dev/null'],
    resources: [
      { apiGroups: ['samplecontroller.k8s.io'], resources: ['foos', 'foos/status'], verbs: ['get', 'list', 'watch', 'update', 'patch'] },
      { apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch'] },
    ],
  });

  /** The leading hub's view, from its /status on the pod network. */
  const hubStatus = async (): Promise<HubStatus> => {
    const pods = (await c.core.listNamespacedPod({ namespace: bed.info.mesh.namespace, labelSelector: 'app.kubernetes.io/name=ctrlmesh-hub' })).items;
    for (const pod of pods) {
      const status = (await (await fetch(`http://${pod.status?.podIP}:9464/status`)).json()) as HubStatus;
      if (status.leader) return status;
    }
    throw new Error('no hub pod leads');
  };
  /** Which pod (by its shard's ordinal) owns each workload namespace's bucket, per the hub's published tables. */
  const owners = async (operator: string, statefulSetName: string): Promise<Map<string, string>> => {
    const status = await hubStatus();
    const op = status.operators.find((o) => o.operator === operator);
    if (!op || op.pending.length > 0) throw new Error(`${operator}: ${op ? `${op.pending.length} handovers pending` : 'no tables yet'}`);
    const out = new Map<string, string>();
    for (const ns of workloads) {
      const bucket = (await c.core.readNamespace({ name: ns })).metadata?.labels?.[HASH_LABEL];
      const shard = op.shards.find((s) => Object.values(s.buckets).some((b) => b.map(String).includes(String(bucket))));
      const id = shard ? /-(\d+)-normal$/.exec(shard.name)?.[1] : undefined;
      if (id === undefined) throw new Error(`${operator}: no shard owns bucket ${bucket} of ${ns}`);
      out.set(ns, `${statefulSetName}-${Number(id) - 1}`);
    }
    return out;
  };
  const logsOf = async (op: OperatorSpec, pods: readonly V1Pod[]): Promise<Map<string, string>> =>
    new Map(await Promise.all(pods.map(async (p) => [p.metadata?.name as string, await podLog(c, op.namespace, p.metadata?.name as string, 'operator')] as const)));

  beforeAll(async () => {
    // One fixed place: a run killed before its cleanup leaves containers and mounts there, which the next run's
    // node start removes (there is only ever one node: it owns the pod bridge and the host's KUBE-* rules).
    dir = join(tmpdir(), 'ctrlmesh-node-test');
    bed = await startNodeBed({
      dir,
      relatedResources: [
        { apiGroups: [''], resources: ['configmaps'] },
        { apiGroups: ['samplecontroller.k8s.io'], resources: ['foos'] },
        { apiGroups: ['apps'], resources: ['deployments'] },
      ],
      onProgress: (m) => process.stderr.write(`node bed: ${m}\n`),
    });
    c = clients(bed.info.cluster.kubeconfigPath);
  }, 1_500_000);

  afterAll(async () => {
    await bed?.down();
    await rm(dir, { recursive: true, force: true });
  }, 120_000);

  it('helm brought NATS, the hub and the agent up in pods, each Ready through its real probe', async () => {
    const pods = (await c.core.listNamespacedPod({ namespace: bed.info.mesh.namespace })).items;
    const byApp = (name: string): V1Pod[] => pods.filter((p) => p.metadata?.labels?.['app.kubernetes.io/name'] === name);
    expect(byApp('ctrlmesh-nats')).toHaveLength(1);
    expect(byApp('ctrlmesh-hub')).toHaveLength(2);
    expect(byApp('ctrlmesh-agent')).toHaveLength(1);
    for (const pod of pods) {
      expect(isReady(pod), pod.metadata?.name).toBe(true);
      const probe = pod.spec?.containers[0]?.readinessProbe?.httpGet?.path;
      expect(probe).toMatch(pod.metadata?.labels?.['app.kubernetes.io/name'] === 'ctrlmesh-nats' ? /^\/healthz/ : /^\/readyz$/);
    }
    expect(bed.info.timings).toBeDefined();
  });

  it('the API server calls the agent’s webhooks: a new namespace is labelled with its bucket at admission', async () => {
    const created = await c.core.createNamespace({ body: { metadata: { name: 'webhook-probe' } } });
    expect(created.metadata?.labels?.[HASH_LABEL]).toMatch(/^\d+$/);
    const config = await c.kc
      .makeApiClient(AdmissionregistrationV1Api)
      .readMutatingWebhookConfiguration({ name: `ctrlmesh-agent-${bed.info.mesh.cluster}` });
    const pods = config.webhooks?.find((w) => w.name.startsWith('pods.'));
    expect(pods?.clientConfig.service).toMatchObject({ namespace: bed.info.mesh.namespace, path: INJECT_PATH });
  });

  describe('operators deployed with 2 replicas as 2 shards', () => {
    const operators: OperatorSpec[] = [];
    beforeAll(async () => {
      operators.push(demo(bed.info.images.controllermesh), foo(bed.info.images.sampleController));
      await applyAll(c, [fooCrd()]);
      for (const op of operators) {
        await applyAll(c, operatorAccess(op));
        const token = await c.core.createNamespacedServiceAccountToken({
          name: credentialsAccount(op),
          namespace: op.namespace,
          body: { spec: { audiences: [], expirationSeconds: 86_400 } },
        });
        await putOperatorSecret(c.core, bed.info.mesh, {
          namespace: op.namespace,
          secretName: PROXY,
          credentials: { server: bed.info.inClusterServer, caPem: bed.info.cluster.caPem, token: token.status?.token as string },
          operator: `${op.namespace}/${op.prefix}-root`,
          shards: [1, 2, 3].map((i) => `${bed.info.mesh.cluster}/${op.prefix}-${i}-normal`),
        });
      }
      for (const ns of workloads) {
        await applyAll(c, [
          { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
          // The Foos' Deployments (at least 1 replica) may create no pod: their nginx image is nowhere to be had.
          { apiVersion: 'v1', kind: 'ResourceQuota', metadata: { name: 'no-pods', namespace: ns }, spec: { hard: { pods: '0' } } } as never,
          { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'cm', namespace: ns, labels: { app: 'demo' } } },
        ]);
      }
      await eventually(() => c.custom.listClusterCustomObject({ group: 'samplecontroller.k8s.io', version: 'v1alpha1', plural: 'foos' }), 60_000, 1000);
      for (const ns of workloads) {
        await applyAll(c, [
          { apiVersion: 'samplecontroller.k8s.io/v1alpha1', kind: 'Foo', metadata: { name: 'foo', namespace: ns }, spec: { deploymentName: `foo-${ns}`, replicas: 1 } } as never,
        ]);
      }
      for (const op of operators) await applyAll(c, [rootConfig(op, 2), statefulSet(op, 2)]);
    }, 600_000);

    it('their pods come up with the proxy injected, started first, and reach the API server through it', async () => {
      for (const op of operators) {
        const pods = await readyPods(c, op.namespace, `app=${op.name}`, 2);
        for (const pod of pods) {
          const proxy = pod.spec?.initContainers?.find((x) => x.name === PROXY);
          expect(proxy?.restartPolicy).toBe('Always');
          expect(pod.status?.initContainerStatuses?.find((s) => s.name === PROXY)?.ready).toBe(true);
          const operator = pod.spec?.containers.find((x) => x.name === 'operator');
          expect(operator?.args).toContain('--kubeconfig=/var/run/ctrlmesh/kubeconfig');
          const creds = pod.spec?.volumes?.find((v) => v.name === 'ctrlmesh-proxy-credentials')?.secret?.items?.map((i) => i.key);
          expect(creds).toEqual([PROXY_SECRET_KEYS.kubeconfig, PROXY_SECRET_KEYS.natsCa, expect.stringMatching(/\.creds$/)]);
        }
      }
    });

    it('the sample operator: every ConfigMap is reconciled by exactly the pod that owns its bucket', async () => {
      const op = operators[0] as OperatorSpec;
      const expected = await eventually(() => owners(`${op.namespace}/${op.prefix}-root`, op.name), 120_000, 1000);
      expect(new Set(expected.values()).size).toBe(2);
      await eventually(
        async () => {
          for (const ns of workloads) {
            const cm = await c.core.readNamespacedConfigMap({ name: 'cm', namespace: ns });
            expect(cm.metadata?.annotations?.[RECONCILED_BY], ns).toBe(expected.get(ns));
          }
        },
        120_000,
        1000,
      );
      const logs = await logsOf(op, await readyPods(c, op.namespace, `app=${op.name}`, 2));
      for (const [pod, log] of logs) {
        const keys = new Set(reconciles(log).map((r) => r.key));
        for (const ns of workloads) expect(keys.has(`${ns}/cm`), `${pod} reconciled ${ns}/cm`).toBe(expected.get(ns) === pod);
      }
    });

    it('the upstream sample-controller: every Foo is synced by exactly one pod, which creates its Deployment', async () => {
      const op = operators[1] as OperatorSpec;
      const expected = await eventually(() => owners(`${op.namespace}/${op.prefix}-root`, op.name), 120_000, 1000);
      for (const ns of workloads) await eventually(() => c.apps.readNamespacedDeployment({ name: `foo-${ns}`, namespace: ns }), 120_000, 1000);
      const logs = await logsOf(op, await readyPods(c, op.namespace, `app=${op.name}`, 2));
      for (const [pod, log] of logs) {
        for (const ns of workloads) expect(log.includes(`"Successfully synced" objectName="${ns}/foo"`), `${pod} synced ${ns}/foo`).toBe(expected.get(ns) === pod);
      }
    });

    it('the operators reach the API server only through their proxies: every request they made ran as the proxy’s credentials', async () => {
      const audit = (await readFile(bed.info.auditLogPath, 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as { user: { username: string }; userAgent?: string; objectRef?: { resource?: string } });
      for (const [op, agent] of [[operators[0], 'sample-operator'], [operators[1], 'sample-controller']] as const) {
        const made = audit.filter((e) => e.userAgent?.includes(agent as string) || (agent === 'sample-operator' && e.objectRef?.resource === 'configmaps' && e.user.username.includes((op as OperatorSpec).namespace)));
        expect(made.length).toBeGreaterThan(0);
        expect(new Set(made.map((e) => e.user.username))).toEqual(new Set([`system:serviceaccount:${(op as OperatorSpec).namespace}:${credentialsAccount(op as OperatorSpec)}`]));
      }
    });

    it('scaling the sample operator to 3 hands buckets over with no object reconciled by two pods at once', async () => {
      const op = operators[0] as OperatorSpec;
      // Churn: every ConfigMap changes every half second, so each is reconciled over and over across the handover.
      const churn = new AbortController();
      const churning = (async () => {
        for (let i = 0; !churn.signal.aborted; i += 1) {
          const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
          await Promise.all(
            workloads.map((ns) => c.core.patchNamespacedConfigMap({ name: 'cm', namespace: ns, body: { data: { tick: String(i) } } }, merge).catch(() => undefined)),
          );
          await new Promise((r) => setTimeout(r, 500));
        }
      })();
      await applyAll(c, [rootConfig(op, 3), statefulSet(op, 3)]);
      const pods = await readyPods(c, op.namespace, `app=${op.name}`, 3);
      const expected = await eventually(async () => {
        const found = await owners(`${op.namespace}/${op.prefix}-root`, op.name);
        if (new Set(found.values()).size !== 3) throw new Error(`owners ${JSON.stringify([...found])}`);
        return found;
      }, 180_000, 1000);
      await new Promise((r) => setTimeout(r, 5000));
      churn.abort();
      await churning;
      await eventually(async () => {
        for (const ns of workloads) {
          const cm = await c.core.readNamespacedConfigMap({ name: 'cm', namespace: ns });
          expect(cm.metadata?.annotations?.[RECONCILED_BY], ns).toBe(expected.get(ns));
        }
      }, 120_000, 1000);
      const records = [...(await logsOf(op, pods)).values()].flatMap(reconciles);
      expect(records.length).toBeGreaterThan(workloads.length * 3);
      expect(overlaps(records)).toEqual([]);
      // The new pod reconciled only what it was handed; the old pods stopped touching what they gave away.
      const last = new Map<string, Reconcile>();
      for (const r of records.sort((a, b) => a.started - b.started)) last.set(r.key, r);
      for (const ns of workloads) expect(last.get(`${ns}/cm`)?.pod, ns).toBe(expected.get(ns));
    }, 420_000);

    it('a deleted shard pod comes back as the same shard, with its identity, and serves its buckets', async () => {
      const op = operators[0] as OperatorSpec;
      const victim = `${op.name}-1`;
      const old = await c.core.readNamespacedPod({ name: victim, namespace: op.namespace });
      await c.core.deleteNamespacedPod({ name: victim, namespace: op.namespace });
      const back = await eventually(async () => {
        const pod = await c.core.readNamespacedPod({ name: victim, namespace: op.namespace });
        if (pod.metadata?.uid === old.metadata?.uid || !isReady(pod)) throw new Error(`${victim} not back yet`);
        return pod;
      }, 240_000, 1000);
      const shardArg = (p: V1Pod): string | undefined => p.spec?.initContainers?.find((x) => x.name === PROXY)?.args?.find((a) => a.startsWith('--shard='));
      expect(shardArg(back)).toBe(shardArg(old));
      const expected = await owners(`${op.namespace}/${op.prefix}-root`, op.name);
      const mine = workloads.filter((ns) => expected.get(ns) === victim);
      expect(mine.length).toBeGreaterThan(0);
      for (const ns of mine) await applyAll(c, [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'after-delete', namespace: ns, labels: { app: 'demo' } } }]);
      await eventually(async () => {
        for (const ns of mine) expect((await c.core.readNamespacedConfigMap({ name: 'after-delete', namespace: ns })).metadata?.annotations?.[RECONCILED_BY]).toBe(victim);
      }, 120_000, 1000);
    }, 360_000);

    it('restarting containerd and then the kubelet leaves every pod running and the mesh serving', async () => {
      const op = operators[0] as OperatorSpec;
      const before = await readyPods(c, op.namespace, `app=${op.name}`, 3);
      const ids = (pods: readonly V1Pod[]): string[] => pods.flatMap((p) => [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])].map((s) => `${p.metadata?.name}/${s.name}:${s.containerID}`)).sort();
      await bed.node.restartContainerd();
      await bed.node.restartKubelet();
      const after = await readyPods(c, op.namespace, `app=${op.name}`, 3);
      expect(ids(after)).toEqual(ids(before));
      const expected = await owners(`${op.namespace}/${op.prefix}-root`, op.name);
      for (const ns of workloads) await applyAll(c, [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'after-restart', namespace: ns, labels: { app: 'demo' } } }]);
      await eventually(async () => {
        for (const ns of workloads) expect((await c.core.readNamespacedConfigMap({ name: 'after-restart', namespace: ns })).metadata?.annotations?.[RECONCILED_BY]).toBe(expected.get(ns));
      }, 120_000, 1000);
      await deleteIfPresent(() => c.core.deleteNamespace({ name: 'webhook-probe' }));
    }, 360_000);

    it('reports the figures: time to Ready and memory per pod and container (the kubelet’s own stats)', async () => {
      const summary = (await c.core.connectGetNodeProxyWithPath({ name: bed.info.node.name, path: 'stats/summary' })) as unknown as string;
      const stats = (typeof summary === 'string' ? JSON.parse(summary) : summary) as {
        pods: { podRef: { name: string; namespace: string }; containers: { name: string; memory?: { workingSetBytes?: number } }[] }[];
      };
      const mib = (bytes: number | undefined): string => `${((bytes ?? 0) / 1024 / 1024).toFixed(1)} MiB`;
      const rows = stats.pods
        .filter((p) => p.podRef.namespace !== 'default')
        .map((p) => {
          const containers = p.containers.map((x) => `${x.name} ${mib(x.memory?.workingSetBytes)}`).join(', ');
          const total = p.containers.reduce((sum, x) => sum + (x.memory?.workingSetBytes ?? 0), 0);
          return `${`${p.podRef.namespace}/${p.podRef.name}`.padEnd(44)}${mib(total).padStart(10)}  (${containers})`;
        });
      const proxies = stats.pods.flatMap((p) => p.containers.filter((x) => x.name === PROXY).map((x) => x.memory?.workingSetBytes ?? 0));
      expect(proxies.length).toBe(5);
      const t = bed.info.timings;
      process.stderr.write(
        [
          `figures: builds ${(t.buildMs / 1000).toFixed(1)} s, node Ready ${(t.nodeReadyMs / 1000).toFixed(1)} s, mesh Ready (helm --wait) ${(t.meshReadyMs / 1000).toFixed(1)} s`,
          'memory (working set) per pod:',
          ...rows.map((r) => `  ${r}`),
          '',
        ].join('\n'),
      );
    });
  });
});
