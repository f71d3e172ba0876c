import { isApiStatus } from '../../src/kube/index.js';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { AdmissionregistrationV1Api, CoreV1Api, CustomObjectsApi, loadYaml, type KubernetesObject } from '@kubernetes/client-node';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhookConfigurationName, type AgentHandle } from '../../src/agent/index.js';
import type { HubHandle } from '../../src/hub/index.js';
import { bucketOf, createHashSettings } from '../../src/sharding/index.js';
import { Buckets, Keys, type ClusterReport, type RouteTable } from '../../src/transport/index.js';
import { GROUP, apply, bootstrapTokens, ensureNamespace, eventually, logger, observe, privateNats, routeTables, runAgent, runHub } from './control-fixture.js';
import { cluster, kubeConfigFor, uniqueName } from './helpers/testbed.js';

const HASH = 'ctrlmesh.kusionstack.io/sharding-hash';
// The seed documents' auto-sharding root (clusters/local/sharding-config-auto.yaml), as an operator would apply it.
const seed = loadYaml<KubernetesObject & { spec: Record<string, unknown> }>(
  readFileSync(new URL('../../clusters/local/sharding-config-auto.yaml', import.meta.url), 'utf8'),
);

/** (cluster, bucket) units owned across the tables, each listed once per owner. */
function ownedUnits(tables: readonly RouteTable[]): string[] {
  return tables.flatMap((t) => t.clusters.flatMap((c) => c.buckets.map((b) => `${c.name}:${b}`)));
}

describe('two clusters under one hub (real API servers, private NATS)', () => {
  const kcA = kubeConfigFor(cluster(0));
  const kcB = kubeConfigFor(cluster(1));
  const nameA = uniqueName('fleet-a');
  const nameB = uniqueName('fleet-b');
  const nameLeaving = uniqueName('leaving');
  let nats: Awaited<ReturnType<typeof privateNats>>;
  let hub: HubHandle;
  let agents: AgentHandle[] = [];
  let nc: NatsConnection;

  beforeAll(async () => {
    nats = await privateNats();
    hub = await runHub(nats.nats, 'hub-1', { tokens: bootstrapTokens(nameA, nameB, nameLeaving) });
    agents = await Promise.all([
      runAgent({ registryName: nameA, bed: cluster(0), nats: nats.nats, hash: { algorithm: 'kusionstack' } }),
      runAgent({ registryName: nameB, bed: cluster(1), nats: nats.nats, hash: { algorithm: 'fnv' } }),
    ]);
    nc = await observe(nats.nats);
  });

  afterAll(async () => {
    const remove = (kc: typeof kcA, namespace: string, name: string, plural = 'shardingconfigs'): Promise<unknown> =>
      kc
        .makeApiClient(CustomObjectsApi)
        .deleteNamespacedCustomObject({ group: GROUP, version: 'v1alpha1', namespace, plural, name })
        .catch(() => undefined);
    await Promise.all([
      remove(kcA, 'operator-demo', 'demo-root'),
      remove(kcB, 'operator-demo', 'demo-root'),
      remove(kcA, 'operator-span', 'span-root'),
      remove(kcA, 'operator-demo', 'demo-circuitbreakers', 'circuitbreakers'),
      remove(kcA, 'operator-demo', 'demo-faultinjections', 'faultinjections'),
    ]);
    await nc?.close();
    await Promise.all(agents.map((a) => a.stop()));
    await hub?.stop();
    await nats?.cleanup();
  });

  it('registers both clusters as Ready, recording endpoint and CA but no credentials', async () => {
    await eventually(() => {
      const clusters = hub.status().clusters;
      expect(clusters.map((c) => [c.name, c.health])).toEqual([
        [nameA, 'Ready'],
        [nameB, 'Ready'],
      ]);
    });
    const entry = await (await new Kvm(nc).open(Buckets.clusters)).get(Keys.cluster(nameA));
    const stored = entry?.string() ?? '';
    expect(JSON.parse(stored).cluster).toMatchObject({ name: nameA, server: cluster(0).server, caPem: cluster(0).caPem });
    expect(stored).not.toContain('test-bootstrap-token');
    expect(stored).not.toContain('PRIVATE KEY');
    expect(stored).not.toContain(cluster(0).clientCertPem.slice(30, 90));
  });

  it('serves /healthz, /readyz, /metrics and a status API that `ctrlmesh status` renders', async () => {
    expect((await fetch(`${hub.url}/healthz`)).status).toBe(200);
    await eventually(async () => expect((await fetch(`${hub.url}/readyz`)).status).toBe(200));
    await eventually(async () => {
      const metrics = await (await fetch(`${hub.url}/metrics`)).text();
      expect(metrics.split('\n').filter((l) => l.startsWith('ctrlmesh_hub_leader') || l.startsWith('ctrlmesh_hub_clusters{'))).toEqual(
        expect.arrayContaining([expect.stringMatching(/^ctrlmesh_hub_leader\{.*\} 1$/), expect.stringMatching(/^ctrlmesh_hub_clusters\{.*health="Ready".*\} 2$/)]),
      );
    });
    for (const agent of agents) await eventually(async () => expect((await fetch(`${agent.url}/readyz`)).status).toBe(200));
    const { stdout } = await promisify(execFile)(process.execPath, ['dist/src/cli/main.js', 'status', '--hub', hub.url]);
    expect(stdout).toMatch(new RegExp(`${nameA}\\s+Ready\\s+${cluster(0).server}`));
    expect(stdout).toContain('OPERATOR');
  });

  it('refuses a wrong bootstrap token with a clear error and records nothing', async () => {
    const name = uniqueName('intruder');
    await expect(runAgent({ registryName: name, bed: cluster(0), nats: nats.nats, token: 'wrong' })).rejects.toMatchObject({
      code: 'CM_REGISTRATION',
      message: expect.stringMatching(new RegExp(`cluster "${name}" refused.*bootstrap token`)),
    });
    expect(await (await new Kvm(nc).open(Buckets.clusters)).get(Keys.cluster(name))).toBeNull();
    expect(hub.status().clusters.map((c) => c.name)).not.toContain(name);
  });

  it("applies the seed's ShardingConfig in each cluster: Accepted, and ns-a / ns-b labelled with either algorithm", async () => {
    for (const kc of [kcA, kcB]) {
      await ensureNamespace(kc, 'operator-demo');
      await ensureNamespace(kc, 'ns-a');
      await ensureNamespace(kc, 'ns-b');
    }
    // The agents install the CRDs at start; the API server may need a moment to serve them.
    await eventually(() => apply(kcA, seed));
    await eventually(() => apply(kcB, seed));

    const kusionstack = createHashSettings({ algorithm: 'kusionstack' });
    const fnv = createHashSettings({ algorithm: 'fnv' });
    await eventually(async () => {
      for (const [kc, settings] of [
        [kcA, kusionstack],
        [kcB, fnv],
      ] as const) {
        for (const ns of ['ns-a', 'ns-b']) {
          const labels = (await kc.makeApiClient(CoreV1Api).readNamespace({ name: ns })).metadata?.labels ?? {};
          expect(labels).toMatchObject({
            [HASH]: String(bucketOf(ns, settings)),
            'ctrlmesh.kusionstack.io/namespace': ns,
            'ctrlmesh.kusionstack.io/control': 'true',
          });
        }
      }
    });
    // KusionStack's vectors: ns-a -> 15, ns-b -> 16.
    expect((await kcA.makeApiClient(CoreV1Api).readNamespace({ name: 'ns-a' })).metadata?.labels?.[HASH]).toBe('15');
    expect((await kcA.makeApiClient(CoreV1Api).readNamespace({ name: 'ns-b' })).metadata?.labels?.[HASH]).toBe('16');

    const tables = await eventually(async () => {
      const found = await routeTables(nc, 'operator-demo/demo-root');
      expect(found.map((t) => t.shard).sort()).toEqual([
        `${nameA}/demo-0-canary`,
        `${nameA}/demo-1-normal`,
        `${nameA}/demo-2-normal`,
        `${nameB}/demo-0-canary`,
        `${nameB}/demo-1-normal`,
        `${nameB}/demo-2-normal`,
      ]);
      return found;
    });
    // Each cluster's 32 buckets are split among that cluster's shards, each exactly once.
    const units = ownedUnits(tables);
    expect(new Set(units).size).toBe(units.length);
    expect(units).toHaveLength(64);

    await eventually(async () => {
      const obj = (await kcA.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
        group: GROUP,
        version: 'v1alpha1',
        namespace: 'operator-demo',
        plural: 'shardingconfigs',
        name: 'demo-root',
      })) as { metadata: { generation: number }; status?: { observedGeneration?: number; conditions?: { type: string; status: string }[]; shards?: { name: string }[] } };
      expect(obj.status?.observedGeneration).toBe(obj.metadata.generation);
      expect(obj.status?.conditions).toContainEqual(expect.objectContaining({ type: 'Accepted', status: 'True' }));
      expect(obj.status?.shards?.map((s) => s.name)).toContain(`${nameA}/demo-1-normal`);
    });
  });

  it('reports CircuitBreakers, FaultInjections, operator pods with readiness, namespaces and object counts', async () => {
    const custom = kcA.makeApiClient(CustomObjectsApi);
    const create = (plural: string, kind: string, spec: unknown): Promise<unknown> =>
      eventually(() =>
        custom
          .createNamespacedCustomObject({
            group: GROUP,
            version: 'v1alpha1',
            namespace: 'operator-demo',
            plural,
            body: { apiVersion: `${GROUP}/v1alpha1`, kind, metadata: { name: `demo-${plural}` }, spec },
          })
          .catch((err: unknown) => {
            if (!isApiStatus(err, 409)) throw err;
          }),
      );
    await create('circuitbreakers', 'CircuitBreaker', {
      selector: { matchLabels: { app: 'operator-demo' } },
      rateLimitings: [{ name: 'deletes', resourceRules: [{ apiGroups: [''], resources: ['pods'], verbs: ['delete'], namespaces: ['*'] }], bucket: { burst: 10, interval: '1m', limit: 20 }, triggerPolicy: 'Normal' }],
    });
    await create('faultinjections', 'FaultInjection', {
      selector: { matchLabels: { app: 'operator-demo' } },
      httpFault: [{ name: 'slow', delay: { fixedDelay: '200ms', percent: '50' }, match: { resources: [{ apiGroups: [''], resources: ['pods'], verbs: ['update'], namespaces: ['ns-a'] }] } }],
    });
    const core = kcA.makeApiClient(CoreV1Api);
    const pod = uniqueName('operator-demo');
    await core.createNamespacedPod({
      namespace: 'operator-demo',
      body: { metadata: { name: pod, labels: { app: 'operator-demo' } }, spec: { containers: [{ name: 'op', image: 'operator:dev' }] } },
    });
    await core.createNamespacedConfigMap({ namespace: 'ns-b', body: { metadata: { name: uniqueName('counted') } } });
    const state = await new Kvm(nc).open(Buckets.state);
    const report = await eventually(async () => {
      const value = (await state.get(Keys.report(nameA)))?.json<ClusterReport>();
      expect(value?.circuitBreakers.map((o) => o.name)).toContain('demo-circuitbreakers');
      expect(value?.faultInjections.map((o) => o.name)).toContain('demo-faultinjections');
      // No kubelet in the test bed: the pod exists and is reported not ready.
      expect(value?.pods).toContainEqual(expect.objectContaining({ namespace: 'operator-demo', name: pod, ready: false }));
      expect(value?.objectCounts).toContainEqual(expect.objectContaining({ namespace: 'ns-b', resource: 'configmaps' }));
      return value;
    });
    expect(report?.namespaces.map((n) => n.name)).toEqual(expect.arrayContaining(['ns-a', 'ns-b', 'operator-demo']));
    expect(report?.hash.algorithm).toBe('kusionstack');
    await core.deleteNamespacedPod({ namespace: 'operator-demo', name: pod });
  });

  it('labels objects created later through the admission webhook', async () => {
    const core = kcA.makeApiClient(CoreV1Api);
    // The webhook's object rules follow the related resources of the configs (configmaps and pods here).
    const created = await eventually(async () => {
      const cm = await core.createNamespacedConfigMap({ namespace: 'ns-a', body: { metadata: { name: uniqueName('cm') }, data: { k: 'v' } } });
      expect(cm.metadata?.labels).toMatchObject({ [HASH]: '15', 'ctrlmesh.kusionstack.io/namespace': 'ns-a', 'ctrlmesh.kusionstack.io/control': 'true' });
      return cm;
    });
    expect(created.metadata?.labels?.[HASH]).toBe('15');
    // Updated objects too: an update that drops the labels gets them back. Retried like the create: with
    // failurePolicy Ignore, a webhook call that times out on a loaded machine lets the request through unlabelled.
    await eventually(async () => {
      const current = await core.readNamespacedConfigMap({ namespace: 'ns-a', name: created.metadata?.name as string });
      const updated = await core.replaceNamespacedConfigMap({
        namespace: 'ns-a',
        name: created.metadata?.name as string,
        body: { ...current, metadata: { ...current.metadata, labels: { app: 'x' } } },
      });
      expect(updated.metadata?.labels).toMatchObject({ app: 'x', [HASH]: '15', 'ctrlmesh.kusionstack.io/control': 'true' });
    });
    await eventually(async () => {
      const ns = await core.createNamespace({ body: { metadata: { name: uniqueName('ns-late') } } });
      await core.deleteNamespace({ name: ns.metadata?.name as string });
      expect(ns.metadata?.labels?.['ctrlmesh.kusionstack.io/control']).toBe('true');
    });
  });

  it('yields route tables covering every (cluster, bucket) exactly once for a root spanning both clusters', async () => {
    await ensureNamespace(kcA, 'operator-span');
    await eventually(() =>
      apply(kcA, {
        apiVersion: `${GROUP}/v1alpha1`,
        kind: 'ShardingConfig',
        metadata: { name: 'span-root', namespace: 'operator-span' },
        spec: {
          root: {
            prefix: 'span',
            targetStatefulSet: 'operator-span',
            auto: { shardingSize: 3, everyShardReplicas: 1 },
            resourceSelector: [{ apiGroups: [''], resources: ['configmaps'] }],
            clusters: {},
          },
          controller: { leaderElectionName: 'span-leader', multicluster: true },
          selector: { matchLabels: { app: 'operator-span' } },
        },
      }),
    );
    const tables = await eventually(async () => {
      const found = await routeTables(nc, 'operator-span/span-root');
      expect(found).toHaveLength(3);
      expect(ownedUnits(found)).toHaveLength(64);
      return found;
    });
    const units = ownedUnits(tables);
    const expected = [nameA, nameB].flatMap((c) => Array.from({ length: 32 }, (_, b) => `${c}:${b}`));
    expect([...units].sort()).toEqual([...expected].sort());
    for (const t of tables) expect(t.clusters.map((c) => c.name).sort()).toEqual([nameA, nameB].sort());
    logger.info({ shards: tables.map((t) => t.shard) }, 'spanning root planned');
  });

  it('an agent is Ready only once its webhook is registered; stopped cleanly (as on SIGTERM), it removes it', async () => {
    const name = nameLeaving;
    const admission = kcA.makeApiClient(AdmissionregistrationV1Api);
    const agent = await runAgent({ registryName: name, bed: cluster(0), nats: nats.nats });
    try {
      // Ready sends it the API server's admission calls (a Service's endpoints): the labelling must be in place by then.
      await eventually(async () => expect((await fetch(`${agent.url}/readyz`)).status).toBe(200), 20_000, 20);
      const config = await admission.readMutatingWebhookConfiguration({ name: webhookConfigurationName(name) });
      expect(config.webhooks?.find((w) => w.name.startsWith('namespaces.'))?.clientConfig.url).toBe(agent.webhookUrl);
    } finally {
      await agent.stop();
    }
    await expect(admission.readMutatingWebhookConfiguration({ name: webhookConfigurationName(name) })).rejects.toMatchObject({ code: 404 });
  });
});
