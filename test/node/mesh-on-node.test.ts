import { readFile, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { AdmissionregistrationV1Api, ApiException, CoordinationV1Api, Exec, PatchStrategy, setHeaderOptions, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INJECT_PATH, PROXY_SECRET_KEYS, proxySecretName } from '../../src/agent/index.js';
import { resolveTool, startNodeBed, type NodeBed } from '../../src/dev/index.js';
import type { HubStatus } from '../../src/hub/index.js';
import { RECONCILED_BY } from '../../src/sample-operator/reconciler.js';
import { FileRouteSource, type RouteSource } from '../../src/proxy/index.js';
import type { RouteTable } from '../../src/transport/index.js';
import { eventually } from '../integration/control-fixture.js';
import { bucket, clusterRoute, routeTable, silent, startTestProxy, type TestProxy } from '../integration/helpers/proxy.js';
import { apiServerMetric } from '../integration/helpers/testbed.js';
import { applyAll, clients, deleteIfPresent, isReady, podLog, portForward, readyPods, type Clients, type PortForward } from './kube.js';
import { applyChartProxyPolicy, connectFrom, ownApiCalls, type ConnectOutcome } from './network.js';
import { putOperatorSecret } from './proxy-secret.js';
import { credentialsAccount, operatorAccess, rootConfig, statefulSet, type OperatorSpec } from './operators.js';
import { fooCrd } from './sample-controller.js';
import { widgetCrd, WIDGETS } from '../integration/helpers/conformance-operator.js';
import { shardLockName } from '../../src/proxy/index.js';
import {
  CERT_DIR,
  WEBHOOK_NAMESPACE_LABEL,
  WEBHOOK_PORT,
  WEBHOOK_PORT_NAME,
  figuresSince,
  formatFigures,
  uniqueKeyWebhook,
  webhookCertificate,
  webhookFigures,
  webhookOperatorObjects,
  type WebhookFigures,
} from './webhook-operator.js';

const HASH_LABEL = 'ctrlmesh.kusionstack.io/sharding-hash';
const WORKLOAD_NAMESPACES = 8;
const PROXY = 'ctrlmesh-proxy';
/** The hub chart's status.port. */
const HUB_STATUS_PORT = 9465;

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
  let kubectl: string;
  let helm: string;
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

  /**
   * The operator's namespace, its credentials' account and rights, the proxy Secret with shards 1 to 3's keys, and
   * the agent chart's ctrlmesh-proxy NetworkPolicy there (networkPolicy.operatorNamespaces), in force before its pods.
   */
  const installAccess = async (op: OperatorSpec): Promise<void> => {
    await applyAll(c, operatorAccess(op));
    await applyChartProxyPolicy(
      { helm, kubectl, kubeconfigPath: bed.info.cluster.kubeconfigPath, meshDir: join(bed.info.dir, 'mesh'), release: bed.info.mesh.releases.agent, namespace: bed.info.mesh.namespace },
      op.namespace,
    );
    const token = await c.core.createNamespacedServiceAccountToken({ name: credentialsAccount(op), namespace: op.namespace, body: { spec: { audiences: [], expirationSeconds: 86_400 } } });
    await putOperatorSecret(c.core, bed.info.mesh, {
      namespace: op.namespace,
      secretName: PROXY,
      credentials: { server: bed.info.inClusterServer, caPem: bed.info.cluster.caPem, token: token.status?.token as string },
      operator: `${op.namespace}/${op.prefix}-root`,
      shards: [1, 2, 3].map((i) => `${bed.info.mesh.cluster}/${op.prefix}-${i}-normal`),
    });
  };
  /** A port-forward per hub pod to its /status, which listens on the pod's 127.0.0.1 alone (docs/install.md). */
  const statusForwards = new Map<string, PortForward>();
  /** One pod's /status. A forward whose streams broke (its pod went, or containerd restarted under it) is opened again once. */
  const podStatus = async (name: string, fresh = false): Promise<HubStatus> => {
    let forward = statusForwards.get(name);
    if (!forward) {
      forward = await portForward(kubectl, bed.info.cluster.kubeconfigPath, bed.info.mesh.namespace, name, HUB_STATUS_PORT);
      statusForwards.set(name, forward);
    }
    try {
      return (await (await fetch(`${forward.url}/status`)).json()) as HubStatus;
    } catch (err) {
      statusForwards.delete(name);
      forward.close();
      if (fresh) throw err;
      return podStatus(name, true);
    }
  };
  /** The leading hub's view, from its /status through `kubectl port-forward`, as an operator of the mesh reads it. */
  const hubStatus = async (): Promise<HubStatus> => {
    const pods = (await c.core.listNamespacedPod({ namespace: bed.info.mesh.namespace, labelSelector: 'app.kubernetes.io/name=ctrlmesh-hub' })).items;
    for (const pod of pods) {
      const status = await podStatus(pod.metadata?.name as string);
      if (status.leader) return status;
    }
    throw new Error('no hub pod leads');
  };
  /** Which pod (by its shard's ordinal) owns each workload namespace's bucket, per the hub's published tables. */
  const owners = async (operator: string, statefulSetName: string, namespaces: readonly string[] = workloads): Promise<Map<string, string>> => {
    const status = await hubStatus();
    const op = status.operators.find((o) => o.operator === operator);
    if (!op || op.pending.length > 0) throw new Error(`${operator}: ${op ? `${op.pending.length} handovers pending` : 'no tables yet'}`);
    const out = new Map<string, string>();
    for (const ns of namespaces) {
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
        { apiGroups: [WIDGETS.group], resources: [WIDGETS.plural] },
      ],
      onProgress: (m) => process.stderr.write(`node bed: ${m}\n`),
    });
    c = clients(bed.info.cluster.kubeconfigPath);
    kubectl = (await resolveTool('kubectl')).path;
    helm = (await resolveTool('helm')).path;
  }, 1_500_000);

  afterAll(async () => {
    for (const forward of statusForwards.values()) forward.close();
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

  it("the hub's /status is reached inside its pod alone: not on the pod network, through kubectl port-forward", async () => {
    const pods = (await c.core.listNamespacedPod({ namespace: bed.info.mesh.namespace, labelSelector: 'app.kubernetes.io/name=ctrlmesh-hub' })).items;
    for (const pod of pods) {
      const ip = pod.status?.podIP as string;
      expect((await fetch(`http://${ip}:9464/metrics`)).status).toBe(200);
      expect((await fetch(`http://${ip}:9464/status`)).status).toBe(404);
      await expect(fetch(`http://${ip}:${HUB_STATUS_PORT}/status`)).rejects.toThrow();
    }
    const status = await hubStatus();
    expect(status.clusters.map((x) => x.name)).toEqual([bed.info.mesh.cluster]);
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
      for (const op of operators) await installAccess(op);
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
          const secret = pod.spec?.volumes?.find((v) => v.name === 'ctrlmesh-proxy-credentials')?.secret;
          const shard = proxy?.args?.find((a) => a.startsWith('--shard='))?.slice('--shard='.length) ?? '';
          expect(secret?.secretName).toBe(proxySecretName(PROXY, shard));
          expect(secret?.items?.map((i) => i.key)).toEqual([PROXY_SECRET_KEYS.kubeconfig, PROXY_SECRET_KEYS.natsCa, PROXY_SECRET_KEYS.natsCreds]);
        }
      }
    });

    it("an operator container calling the API server itself finds no token and is refused (401/403), through the Service and the node's address", async () => {
      const op = operators[0] as OperatorSpec;
      const [pod] = await readyPods(c, op.namespace, `app=${op.name}`, 2);
      const name = pod?.metadata?.name as string;
      // The proxy's credentials are mounted into the proxy alone; no container has a ServiceAccount token.
      const operator = pod?.spec?.containers.find((x) => x.name === 'operator');
      expect(operator?.volumeMounts?.map((m) => m.name) ?? []).not.toContain('ctrlmesh-proxy-credentials');
      expect(pod?.spec?.volumes?.some((v) => v.projected?.sources?.some((s) => s.serviceAccountToken))).toBe(false);
      const direct = `https://${bed.info.node.address}:${new URL(bed.info.cluster.server).port}`;
      const report = await ownApiCalls(c, op.namespace, name, 'operator', [direct], `/api/v1/namespaces/${op.namespace}/secrets`);
      expect(report.credentials.filter((where) => where.includes('serviceaccount'))).toEqual([]);
      expect(Object.keys(report.answers).length).toBeGreaterThanOrEqual(2);
      for (const [call, answer] of Object.entries(report.answers)) expect(answer, call).toMatch(/^(401|403|ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT)$/);
      process.stderr.write(`own API calls from ${op.namespace}/${name}/operator (credentials found: ${report.credentials.join(', ') || 'none'}): ${JSON.stringify(report.answers)}\n`);
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
      // Retried: until the restarted kubelet has its pods again, it answers a port-forward with "pod does not exist".
      const expected = await eventually(() => owners(`${op.namespace}/${op.prefix}-root`, op.name), 60_000, 1000);
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

  describe('an operator whose validating webhook reads its own cache, as 3 shards behind their proxies', () => {
    const SERVICE = 'hook-webhook';
    const SELECTOR = { app: 'hook' };
    const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    // Their buckets (fnv) fall in each of the 3 shards' runs: 0-10, 11-21, 22-31; the test checks it with the hub.
    const namespaces = Array.from({ length: 8 }, (_, i) => `hook-${i}`);
    const ADMITTED = /^admission (\S+)\/(\S+) shard=(\S+) allowed=(true|false)$/;
    let op: OperatorSpec;
    let operator: string;
    let caPem: string;
    /** Namespace → the pod of the shard owning it. */
    let expected: Map<string, string>;
    const shardOf = (pod: string): string => `${bed.info.mesh.cluster}/${op.prefix}-${Number(/-(\d+)$/.exec(pod)?.[1]) + 1}-normal`;

    /** Creates a ConfigMap under the webhook: undefined when admitted, else the API server's message. */
    const create = async (namespace: string, name: string, key: string): Promise<string | undefined> => {
      try {
        await c.core.createNamespacedConfigMap({ namespace, body: { metadata: { name, labels: SELECTOR }, data: { key } } });
        return undefined;
      } catch (err) {
        if (!(err instanceof ApiException)) throw err;
        const body = typeof err.body === 'string' ? (JSON.parse(err.body) as { message?: string }) : (err.body as { message?: string });
        return `${err.code}: ${body?.message ?? ''}`;
      }
    };
    const admissions = (log: string): { namespace: string; name: string; pod: string; allowed: boolean }[] =>
      log.split('\n').flatMap((line) => {
        const m = ADMITTED.exec(line.trim());
        return m ? [{ namespace: m[1] as string, name: m[2] as string, pod: m[3] as string, allowed: m[4] === 'true' }] : [];
      });
    /** Every proxy's webhook figures, by pod. */
    const scrape = async (): Promise<Map<string, WebhookFigures>> => {
      const pods = (await c.core.listNamespacedPod({ namespace: op.namespace, labelSelector: `app=${op.name}` })).items.filter(
        (p) => p.status?.podIP && isReady(p) && !p.metadata?.deletionTimestamp,
      );
      return new Map(await Promise.all(pods.map(async (p) => [p.metadata?.name as string, await webhookFigures(p.status?.podIP as string)] as const)));
    };
    const total = (all: Map<string, WebhookFigures>, route: string, owner?: string): number =>
      [...all.values()].flatMap((f) => f.requests).filter((r) => r.route === route && (owner === undefined || r.owner === owner)).reduce((sum, r) => sum + r.count, 0);

    beforeAll(async () => {
      op = {
        ...demo(bed.info.images.controllermesh),
        namespace: 'op-hook',
        name: 'hook-operator',
        prefix: 'hook',
        args: ['--kubeconfig=/dev/null', '--shard=$(POD_NAME)', '--selector=app=hook', '--timestamps', `--webhook-port=${WEBHOOK_PORT}`, `--cert-dir=${CERT_DIR}`],
      };
      operator = `${op.namespace}/${op.prefix}-root`;
      await installAccess(op);
      const cert = await webhookCertificate(SERVICE, op.namespace);
      caPem = cert.caPem;
      for (const ns of namespaces) await applyAll(c, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns, labels: { [WEBHOOK_NAMESPACE_LABEL]: 'true' } } }]);
      await applyAll(c, webhookOperatorObjects(op, 3, cert, SERVICE));
      await readyPods(c, op.namespace, `app=${op.name}`, 3);
      await applyAll(c, [uniqueKeyWebhook(op, SERVICE, cert.caPem, SELECTOR)]);
      expected = await eventually(async () => {
        const found = await owners(operator, op.name, namespaces);
        if (new Set(found.values()).size !== 3) throw new Error(`owners ${JSON.stringify([...found])}`);
        return found;
      }, 180_000, 1000);
    }, 600_000);

    afterAll(async () => {
      await deleteIfPresent(() => c.kc.makeApiClient(AdmissionregistrationV1Api).deleteValidatingWebhookConfiguration({ name: `${op.name}-unique-key` }));
    });

    it('the proxy takes the webhook port: the port name moved, the certificate mounted read-only, the flags passed', async () => {
      for (const pod of await readyPods(c, op.namespace, `app=${op.name}`, 3)) {
        const proxy = pod.spec?.initContainers?.find((x) => x.name === PROXY);
        expect(proxy?.ports).toEqual([expect.objectContaining({ name: WEBHOOK_PORT_NAME, containerPort: 5445 })]);
        expect(proxy?.volumeMounts).toContainEqual(expect.objectContaining({ name: 'webhook-certs', mountPath: CERT_DIR, readOnly: true }));
        expect(proxy?.args).toEqual(expect.arrayContaining(['--webhook-listen=0.0.0.0:5445', `--webhook-port=${WEBHOOK_PORT}`, `--webhook-cert-dir=${CERT_DIR}`]));
        expect(pod.spec?.containers.find((x) => x.name === 'operator')?.ports?.[0]?.name).toBeUndefined();
      }
    });

    it("the API server's reviews reach the shard owning each namespace, whose cache decides: a duplicate key is refused in every shard's namespaces", async () => {
      // Every shard owns some of the namespaces.
      expect(new Set(expected.values()).size).toBe(3);
      // The first ConfigMap of each namespace, once the webhook answers there (tables and endpoints in place).
      for (const ns of namespaces) {
        await eventually(async () => {
          const refused = await create(ns, 'first', `key-${ns}`);
          if (refused && !refused.startsWith('409')) throw new Error(`${ns}: ${refused}`);
        }, 120_000, 1000);
      }
      // Reconciled by its owner: the owner's informer has it in its cache.
      await eventually(async () => {
        for (const ns of namespaces) expect((await c.core.readNamespacedConfigMap({ name: 'first', namespace: ns })).metadata?.annotations?.[RECONCILED_BY], ns).toBe(expected.get(ns));
      }, 120_000, 1000);
      const steady = await scrape();
      for (const ns of namespaces) {
        const owner = expected.get(ns) as string;
        expect(await create(ns, 'second', `key-${ns}`), ns).toContain(`data.key is already used by ConfigMap ${ns}/first (decided by shard ${owner})`);
        expect(await create(ns, 'other-key', `other-${ns}`), ns).toBeUndefined();
      }
      // Each review was answered by the owner alone: every admission line of a pod is for a namespace it owns.
      const pods = await readyPods(c, op.namespace, `app=${op.name}`, 3);
      const lines = (await Promise.all(pods.map(async (p) => admissions(await podLog(c, op.namespace, p.metadata?.name as string, 'operator'))))).flat();
      const perPod = new Map<string, number>();
      for (const line of lines) {
        expect(line.pod, `${line.namespace}/${line.name}`).toBe(expected.get(line.namespace));
        perPod.set(line.pod, (perPod.get(line.pod) ?? 0) + 1);
      }
      for (const ns of namespaces) expect(lines.filter((l) => l.namespace === ns && l.name === 'second').map((l) => l.allowed), ns).toEqual([false]);
      expect(perPod.size).toBe(3);
      // What a shard that does not own the namespace would have said: its cache lacks `first`, so it would admit.
      const dispatcher = new Agent({ connect: { ca: caPem, servername: `${SERVICE}.${op.namespace}.svc` } });
      const ns = namespaces[0] as string;
      const review = { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'probe', kind: { group: '', version: 'v1', kind: 'ConfigMap' }, namespace: ns, name: 'probe', operation: 'CREATE', object: { metadata: { name: 'probe', namespace: ns }, data: { key: `key-${ns}` } } } };
      const decisions = new Map<string, boolean>();
      for (const pod of pods) {
        const answer = await request(`https://${pod.status?.podIP}:${WEBHOOK_PORT}/validate`, { method: 'POST', dispatcher, headers: { 'content-type': 'application/json' }, body: JSON.stringify(review) });
        decisions.set(pod.metadata?.name as string, ((await answer.body.json()) as { response: { allowed: boolean } }).response.allowed);
      }
      await dispatcher.close();
      expect([...decisions].filter(([, allowed]) => !allowed).map(([pod]) => pod)).toEqual([expected.get(ns)]);
      // The proxies' metric: reviews answered by their own operator and sent on to the owner's pod.
      const scraped = await scrape();
      expect(total(scraped, 'local')).toBeGreaterThan(0);
      expect(total(scraped, 'forwarded')).toBeGreaterThan(0);
      process.stderr.write(
        [
          `webhook figures: ${lines.length} admissions by the owners (${[...perPod].map(([pod, n]) => `${pod} ${n}`).join(', ')}); per proxy, since it started:`,
          ...[...scraped].map(([pod, f]) => `  proxy of ${pod}: ${formatFigures(f)}`),
          'per proxy, the duplicate and other-key creates alone (tables and pods settled):',
          ...[...scraped].map(([pod, f]) => `  proxy of ${pod}: ${formatFigures(figuresSince(f, steady.get(pod)))}`),
          '',
        ].join('\n'),
      );
    }, 420_000);

    it("stopping a shard's pod makes admission in its namespaces fail as failurePolicy Fail says, while the others still answer", async () => {
      const victim = `${op.name}-2`;
      const down = namespaces.filter((ns) => expected.get(ns) === victim);
      const up = namespaces.filter((ns) => expected.get(ns) !== victim);
      expect(down.length).toBeGreaterThan(0);
      const shard = shardOf(victim);
      // Reviews of the shard answered before (while the tables had no endpoint for it yet, at start).
      const before = await scrape();
      await c.apps.patchNamespacedStatefulSet({ name: op.name, namespace: op.namespace, body: { spec: { replicas: 2 } } }, mergePatch);
      await readyPods(c, op.namespace, `app=${op.name}`, 2);
      const stopped = Date.now();
      const messages: string[] = [];
      for (const ns of down) {
        const refused = await eventually(async () => {
          const message = await create(ns, 'during-outage', `outage-${ns}`);
          if (message === undefined) {
            await c.core.deleteNamespacedConfigMap({ name: 'during-outage', namespace: ns });
            throw new Error(`${ns}: admitted while its owner is down`);
          }
          return message;
        }, 60_000, 500);
        expect(refused, ns).toContain('failed calling webhook');
        messages.push(refused);
      }
      const failing = Date.now() - stopped;
      // The API server keeps connections to pods' proxies behind the Service, as many as reviews ran at once; each that
      // was the stopped pod's ends its next review in EOF (not retried), whatever namespace it was for, and until
      // kube-proxy drops the pod from the Service a new connection may still be sent to it (refused). Only those may
      // fail, never reaching a proxy: a create is tried again on them alone.
      const pastStaleConnections = async (ns: string, name: string, key: string): Promise<string | undefined> => {
        let message: string | undefined;
        await eventually(async () => {
          message = await create(ns, name, key);
          if (message !== undefined && /: EOF|connection reset|connect: connection refused/.test(message)) throw new Error(`${ns}: ${message}`);
        }, 10_000, 500);
        return message;
      };
      for (const ns of up) {
        expect(await pastStaleConnections(ns, 'during-outage', `outage-${ns}`), ns).toBeUndefined();
        expect(await pastStaleConnections(ns, 'second-again', `key-${ns}`), ns).toContain(`decided by shard ${expected.get(ns)}`);
      }
      // Once the agent reports the pod gone, the tables list no endpoint for the shard: answered 503 without trying.
      const since = (now: Map<string, WebhookFigures>, route: string): number => total(now, route, shard) - total(before, route, shard);
      const scraped = await eventually(async () => {
        expect(await create(down[0] as string, 'during-outage', 'again')).toContain('failed calling webhook');
        const now = await scrape();
        if (since(now, 'unowned') === 0) throw new Error(`no review of ${shard} answered as unowned yet`);
        return now;
      }, 60_000, 1000);
      process.stderr.write(
        `webhook outage: ${down.length} namespaces of ${shard} refused within ${(failing / 1000).toFixed(1)} s of its pod stopping ` +
          `(${messages[0]}); answers for it since: failed ${since(scraped, 'failed')} (its pod unreachable), unowned ${since(scraped, 'unowned')} ` +
          `(no endpoint left in the tables); ${up.length} other namespaces served\n`,
      );
      // Back: the shard's pod again, and its namespaces admitted again.
      await c.apps.patchNamespacedStatefulSet({ name: op.name, namespace: op.namespace, body: { spec: { replicas: 3 } } }, mergePatch);
      await readyPods(c, op.namespace, `app=${op.name}`, 3);
      for (const ns of down) {
        await eventually(async () => {
          const message = await create(ns, 'after-outage', `after-${ns}`);
          if (message && !message.startsWith('409')) throw new Error(`${ns}: ${message}`);
        }, 120_000, 1000);
      }
    }, 420_000);
  });

  describe('an exec session through a proxy, to a container on the node', () => {
    const namespace = `exec-${Math.random().toString(36).slice(2, 8)}`;
    const acknowledged: { version: number; at: number }[] = [];
    let harness: TestProxy;
    let version = 1;
    const table = (buckets: number[]): RouteTable =>
      routeTable({ shard: 'shard-0', homeCluster: bed.info.cluster.name, version: version++, clusters: [clusterRoute(bed.info.cluster, buckets)] });
    const execSessions = (): Promise<number> => apiServerMetric(bed.info.cluster, 'apiserver_longrunning_requests', ['subresource="exec"']);

    beforeAll(async () => {
      await applyAll(c, [
        { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } },
        {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: 'shell', namespace, labels: { app: 'shell' } },
          spec: {
            containers: [{ name: 'shell', image: bed.info.images.controllermesh, imagePullPolicy: 'Never', command: ['/usr/local/bin/node', '-e', 'setInterval(() => undefined, 1 << 30)'] }],
            terminationGracePeriodSeconds: 0,
          },
        } as never,
      ]);
      await readyPods(c, namespace, 'app=shell', 1);
      const source = (path: string): RouteSource => {
        const file = new FileRouteSource({ path, logger: silent, pollIntervalMs: 100 });
        return { description: file.description, leased: file.leased, start: (h) => file.start(h), stop: () => file.stop(), acknowledge: async (t) => void acknowledged.push({ version: t.version, at: Date.now() }) };
      };
      harness = await startTestProxy({ table: table([bucket(namespace)]), credentialsPath: bed.info.cluster.kubeconfigPath, source });
    }, 300_000);

    afterAll(async () => {
      await harness?.close();
      await deleteIfPresent(() => c.core.deleteNamespace({ name: namespace }));
    });

    it("runs in the shard's namespace through tables that leave it the namespace, and ends before a table revoking it is acknowledged", async () => {
      const sessionsBefore = await execSessions();
      const [stdin, stdout] = [new PassThrough(), new PassThrough()];
      let echoed = '';
      stdout.on('data', (chunk: Buffer) => (echoed += chunk.toString('utf8')));
      // kubectl's own WebSocket exec, through the proxy's kubeconfig; the container echoes its stdin.
      const socket = await new Exec(harness.kubeConfig()).exec(namespace, 'shell', 'shell', ['/usr/local/bin/node', '-e', 'process.stdin.pipe(process.stdout)'], stdout, null, stdin, false);
      let closedAt = 0;
      socket.on('close', () => (closedAt = Date.now()));
      stdin.write('before\n');
      await eventually(async () => expect(echoed).toContain('before'), 30_000, 100);
      expect(await execSessions()).toBe(sessionsBefore + 1);

      // Tables that grant another bucket, then revoke it again, leave the namespace's session be.
      const other = (bucket(namespace) + 1) % 32;
      for (const buckets of [[bucket(namespace), other], [bucket(namespace)]]) {
        const next = table(buckets);
        await harness.writeTable(next);
        await eventually(async () => expect(acknowledged.map((a) => a.version)).toContain(next.version), 30_000, 100);
      }
      stdin.write('still\n');
      await eventually(async () => expect(echoed).toContain('still'), 30_000, 100);
      expect(closedAt).toBe(0);

      const revoking = table([]);
      await harness.writeTable(revoking);
      await eventually(async () => expect(acknowledged.map((a) => a.version)).toContain(revoking.version), 30_000, 100);
      expect(closedAt).toBeGreaterThan(0);
      expect(closedAt).toBeLessThanOrEqual(acknowledged.find((a) => a.version === revoking.version)!.at);
      // The API server's session ended too.
      await eventually(async () => expect(await execSessions()).toBe(sessionsBefore), 30_000, 200);
      // A new session into the revoked namespace is refused.
      await expect(new Exec(harness.kubeConfig()).exec(namespace, 'shell', 'shell', ['true'], null, null, null, false)).rejects.toThrow();
    }, 120_000);
  });
  describe('a controller-runtime operator at its defaults (leader election, protobuf), as 2 then 3 shards', () => {
    let op: OperatorSpec;
    let operator: string;
    const leases = (): Promise<{ name: string; holder: string }[]> =>
      c.kc
        .makeApiClient(CoordinationV1Api)
        .listNamespacedLease({ namespace: op.namespace })
        .then((l) => l.items.map((x) => ({ name: x.metadata?.name ?? '', holder: x.spec?.holderIdentity ?? '' })));
    const shard = (i: number): string => `${bed.info.mesh.cluster}/${op.prefix}-${i}-normal`;
    /** Each shard's Lease exists, named for it, and is held by its own pod (controller-runtime's identity is `<hostname>_<uuid>`). */
    const electedPerShard = async (count: number): Promise<void> => {
      await eventually(async () => {
        const found = await leases();
        expect(found.map((l) => l.name).sort()).toEqual(Array.from({ length: count }, (_, i) => shardLockName(`${op.name}-leader`, shard(i + 1))).sort());
        for (let i = 1; i <= count; i++) expect(found.find((l) => l.name === shardLockName(`${op.name}-leader`, shard(i)))?.holder).toMatch(new RegExp(`^${op.name}-${i - 1}_`, 'u'));
      }, 180_000, 1000);
    };
    const reconciledByOwners = async (): Promise<void> => {
      const expected = await eventually(() => owners(operator, op.name), 120_000, 1000);
      await eventually(async () => {
        for (const ns of workloads) {
          const widget = (await c.custom.getNamespacedCustomObject({ ...WIDGETS, namespace: ns, name: 'w' })) as { status?: { reconciledBy?: string } };
          expect(widget.status?.reconciledBy, ns).toBe(expected.get(ns));
        }
      }, 180_000, 1000);
    };

    beforeAll(async () => {
      op = {
        namespace: 'op-cr',
        name: 'conformance-operator',
        prefix: 'cr',
        image: bed.info.images.conformanceOperator,
        // As kubebuilder's manager Deployment runs it; the lock's namespace is the pod's own, found in-cluster.
        args: ['--leader-elect'],
        resources: [
          { apiGroups: [WIDGETS.group], resources: [WIDGETS.plural, `${WIDGETS.plural}/status`], verbs: ['get', 'list', 'watch', 'update', 'patch'] },
          { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
        ],
        extraRules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch'] }],
      };
      operator = `${op.namespace}/${op.prefix}-root`;
      await applyAll(c, [widgetCrd()]);
      await installAccess(op);
      await eventually(() => c.custom.listClusterCustomObject(WIDGETS), 60_000, 1000);
      for (const ns of workloads) {
        await applyAll(c, [{ apiVersion: `${WIDGETS.group}/${WIDGETS.version}`, kind: 'Widget', metadata: { name: 'w', namespace: ns }, spec: { size: 1 } } as never]);
      }
      await applyAll(c, [rootConfig(op, 2), statefulSet(op, 2)]);
    }, 600_000);

    it('2 shards: one Lease each, held by its pod; every Widget reconciled by its bucket\'s owner', async () => {
      await readyPods(c, op.namespace, `app=${op.name}`, 2);
      await electedPerShard(2);
      await reconciledByOwners();
    }, 420_000);

    it('scaled to 3: the new shard elects its own leader and takes its buckets; the old shards keep theirs until it serves', async () => {
      const since = Date.now();
      await applyAll(c, [rootConfig(op, 3), statefulSet(op, 3)]);
      await readyPods(c, op.namespace, `app=${op.name}`, 3);
      await electedPerShard(3);
      await reconciledByOwners();
      // Each unit handed to the new shard was served by nobody only between its revocation and its grant.
      const history = (await hubStatus()).operators.find((o) => o.operator === operator)?.history ?? [];
      const moved = history.filter((h) => h.to === shard(3) && h.revokedAt >= since);
      expect(moved.length).toBeGreaterThan(0);
      const gaps = moved.map((h) => (h.grantedAt ?? 0) - h.revokedAt);
      process.stderr.write(`figures: adding a 3rd shard moved ${moved.length} units, unserved ${Math.min(...gaps)}-${Math.max(...gaps)} ms each (${moved.map((h) => h.grantedBy).join(',')})\n`);
      expect(moved.every((h) => h.grantedBy === 'ack')).toBe(true);
    }, 600_000);
  });

  describe('NetworkPolicies, enforced on the node by kube-router', () => {
    const outside = `outside-${Math.random().toString(36).slice(2, 8)}`;
    // The charts' default monitoringNamespaceSelector names this namespace.
    const monitoring = 'monitoring';
    const shellPod = (namespace: string): KubernetesObject => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'shell', namespace, labels: { app: 'shell' } },
      spec: {
        containers: [{ name: 'shell', image: bed.info.images.controllermesh, imagePullPolicy: 'Never', command: ['/usr/local/bin/node', '-e', 'setInterval(() => undefined, 1 << 30)'] }],
        terminationGracePeriodSeconds: 0,
      },
    } as KubernetesObject);
    /** A TCP connect from the host, which every NetworkPolicy implementation admits (the kubelet's probes come from it). */
    const fromHost = (target: string): Promise<ConnectOutcome> =>
      new Promise((resolvePromise) => {
        const i = target.lastIndexOf(':');
        const socket = connect({ host: target.slice(0, i), port: Number(target.slice(i + 1)) });
        const done = (outcome: ConnectOutcome): void => {
          socket.destroy();
          resolvePromise(outcome);
        };
        socket.setTimeout(3000, () => done('ETIMEDOUT'));
        socket.once('connect', () => done('connected'));
        socket.once('error', (err: NodeJS.ErrnoException) => done(err.code ?? err.message));
      });
    const podIp = async (namespace: string, selector: string): Promise<string[]> =>
      (await c.core.listNamespacedPod({ namespace, labelSelector: selector })).items.filter((p) => isReady(p) && !p.metadata?.deletionTimestamp).map((p) => p.status?.podIP as string);

    beforeAll(async () => {
      for (const namespace of [outside, monitoring]) await applyAll(c, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } }, shellPod(namespace)]);
      for (const namespace of [outside, monitoring]) await readyPods(c, namespace, 'app=shell', 1);
    }, 300_000);

    afterAll(async () => {
      for (const name of [outside, monitoring]) await deleteIfPresent(() => c.core.deleteNamespace({ name }));
    });

    it("a pod outside the mesh reaches none of NATS's, the hub's, the agent's or a proxy's ports but the two webhooks; the monitoring namespace reaches the ops ports alone", async () => {
      expect(bed.node.components.networkPolicies).toBeDefined();
      const meshNs = bed.info.mesh.namespace;
      const [nats] = await podIp(meshNs, 'app.kubernetes.io/name=ctrlmesh-nats');
      const hubs = await podIp(meshNs, 'app.kubernetes.io/name=ctrlmesh-hub');
      const [agent] = await podIp(meshNs, 'app.kubernetes.io/name=ctrlmesh-agent');
      const [proxy] = await podIp('op-demo', 'app=sample-operator');
      const [webhookProxy] = await podIp('op-hook', 'app=hook-operator');
      const natsService = new URL(bed.info.mesh.natsUrl).host;
      // Who may connect where, by the charts' policies (docs/install.md, section 7): `mesh` only the mesh's own pods,
      // `monitoring` also the monitoring namespaces, `anyone` every source.
      const ports: [string, 'mesh' | 'monitoring' | 'anyone'][] = [
        [`${nats}:4222`, 'mesh'],
        [natsService, 'mesh'],
        [`${nats}:8222`, 'monitoring'],
        ...hubs.map((ip): [string, 'monitoring'] => [`${ip}:9464`, 'monitoring']),
        [`${agent}:9465`, 'monitoring'],
        [`${agent}:9443`, 'anyone'],
        [`${proxy}:5441`, 'monitoring'],
        [`${webhookProxy}:5441`, 'monitoring'],
        [`${webhookProxy}:5445`, 'anyone'],
        // The operator's own webhook port, where the other shards' proxies send reviews on.
        [`${webhookProxy}:${WEBHOOK_PORT}`, 'mesh'],
      ];
      const targets = ports.map(([t]) => t);
      // Every port listens: the host, which the policies never restrict, connects to each.
      for (const target of targets) expect(await fromHost(target), `host to ${target}`).toBe('connected');
      const seen = await eventually(async () => {
        const [fromOutside, fromMonitoring] = await Promise.all([connectFrom(c, outside, 'shell', 'shell', targets), connectFrom(c, monitoring, 'shell', 'shell', targets)]);
        // kube-router rejects with an ICMP port unreachable, which the kernel sends a peer at most about once a second
        // after a burst (net.ipv4.icmp_ratelimit): a connect past the burst is not answered, and times out.
        const refused = /^(ECONNREFUSED|ETIMEDOUT)$/u;
        for (const [target, who] of ports) {
          expect(fromOutside.get(target), `${outside} to ${target}`).toMatch(who === 'anyone' ? /^connected$/u : refused);
          expect(fromMonitoring.get(target), `${monitoring} to ${target}`).toMatch(who === 'mesh' ? refused : /^connected$/u);
        }
        return { fromOutside, fromMonitoring };
      }, 60_000, 2000);
      const line = (m: Map<string, ConnectOutcome>): string => [...m].map(([t, o]) => `${t} ${o}`).join(', ');
      process.stderr.write(`network policies: from ${outside}: ${line(seen.fromOutside)}\nfrom ${monitoring}: ${line(seen.fromMonitoring)}\n`);
      // And the mesh still serves under them: a new ConfigMap is reconciled by its owner.
      const op = 'op-demo/demo-root';
      const expected = await owners(op, 'sample-operator');
      for (const ns of workloads) await applyAll(c, [{ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'after-policies', namespace: ns, labels: { app: 'demo' } } }]);
      await eventually(async () => {
        for (const ns of workloads) expect((await c.core.readNamespacedConfigMap({ name: 'after-policies', namespace: ns })).metadata?.annotations?.[RECONCILED_BY], ns).toBe(expected.get(ns));
      }, 120_000, 1000);
    }, 300_000);
  });
});
