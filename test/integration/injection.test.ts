import { AdmissionregistrationV1Api, ApiException, CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENABLE_PROXY_LABEL, type AgentHandle } from '../../src/agent/index.js';
import type { HubHandle } from '../../src/hub/index.js';
import { apply, bootstrapTokens, ensureNamespace, eventually, privateNats, routeSignerKey, runAgent, runHub } from './control-fixture.js';
import { cluster, kubeConfigFor, uniqueName } from './helpers/testbed.js';

const IMAGE = 'controllermesh:injection-test';
const KUBECONFIG = '/var/run/ctrlmesh/kubeconfig';
const CREDENTIALS = '/etc/ctrlmesh/credentials';
const PROXY_SECRET = 'operator-proxy-credentials';

describe('sidecar injection by the agent webhook, in a real API server', () => {
  const registryName = uniqueName('inject');
  const namespace = uniqueName('operators');
  let kc: KubeConfig;
  let core: CoreV1Api;
  let nats: Awaited<ReturnType<typeof privateNats>>;
  let hub: HubHandle;
  let agent: AgentHandle | undefined;

  const shardingConfig = (name: string, selector: Record<string, string>) => ({
    apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1',
    kind: 'ShardingConfig',
    metadata: { name, namespace },
    spec: {
      selector: { matchLabels: selector },
      controller: { leaderElectionName: 'demo-leader' },
      limits: [{ relateResources: [{ apiGroups: [''], resources: ['configmaps'] }], selector: { matchLabels: { app: 'demo' } } }],
    },
  });

  const pod = (name: string, labels: Record<string, string>): V1Pod => ({
    metadata: { name, namespace, labels },
    spec: {
      containers: [
        { name: 'manager', image: 'operator:1', command: ['/manager'], args: ['--leader-elect'] },
        { name: 'log-shipper', image: 'shipper:1', env: [{ name: 'LEVEL', value: 'info' }] },
      ],
    },
  });

  beforeAll(async () => {
    kc = kubeConfigFor(cluster(0));
    core = kc.makeApiClient(CoreV1Api);
    nats = await privateNats();
    hub = await runHub(nats.nats, uniqueName('hub'), { tokens: bootstrapTokens(registryName) });
    agent = await runAgent({
      registryName,
      bed: cluster(0),
      nats: nats.nats,
      sidecar: { image: IMAGE, routeSigners: [routeSignerKey(nats.nats)], secretName: PROXY_SECRET },
    });
    await ensureNamespace(kc, namespace);
    await apply(kc, shardingConfig('demo', { app: 'demo' }));
    // The agent registers its MutatingWebhookConfiguration once its informers run.
    const admission = kc.makeApiClient(AdmissionregistrationV1Api);
    await eventually(async () => {
      const config = await admission.readMutatingWebhookConfiguration({ name: `ctrlmesh-agent-${registryName}` });
      expect(config.webhooks?.map((w) => w.name)).toContain('pods.ctrlmesh.kusionstack.io');
    });
  });

  afterAll(async () => {
    await agent?.stop();
    await hub?.stop();
    await nats?.cleanup();
    // failurePolicy Fail: a configuration left behind would refuse every later labelled pod of the shared bed.
    await kc
      .makeApiClient(AdmissionregistrationV1Api)
      .deleteMutatingWebhookConfiguration({ name: `ctrlmesh-agent-${registryName}` })
      .catch(() => undefined);
    await core.deleteNamespace({ name: namespace }).catch(() => undefined);
  });

  it('gives a labelled operator pod the proxy sidecar and the kubeconfig, in the operator container only', async () => {
    const created = await core.createNamespacedPod({ namespace, body: pod('demo-0', { app: 'demo', [ENABLE_PROXY_LABEL]: 'true' }) });
    const [sidecar, ...otherInit] = created.spec?.initContainers ?? [];
    expect(otherInit).toEqual([]);
    expect(sidecar).toMatchObject({ name: 'ctrlmesh-proxy', image: IMAGE, restartPolicy: 'Always' });
    // The proxy follows the shard `<cluster>/<config>` of operator `<namespace>/<config>` through the hub's NATS
    // (TLS, as the agent reaches it), as that shard's own NATS user, trusting only tables the hub's key signed.
    expect(sidecar?.args).toEqual([
      'proxy',
      `--nats=${nats.nats.url}`,
      `--nats-ca=${CREDENTIALS}/nats-ca.crt`,
      `--nats-creds=${CREDENTIALS}/nats.creds`,
      `--route-signer=${routeSignerKey(nats.nats)}`,
      `--operator=${namespace}/demo`,
      `--shard=${registryName}/demo`,
      '--listen=127.0.0.1:5443',
      '--ops-listen=0.0.0.0:5441',
      '--store=/var/run/ctrlmesh/route-table.json',
      `--write-kubeconfig=${KUBECONFIG}`,
      `--credentials=${CREDENTIALS}/kubeconfig`,
      `--mesh-secret=${PROXY_SECRET}`,
      '--pod-labels=/etc/ctrlmesh/pod-info/labels',
    ]);
    expect(sidecar?.volumeMounts).toEqual([
      { name: 'ctrlmesh-kubeconfig', mountPath: '/var/run/ctrlmesh' },
      { name: 'ctrlmesh-proxy-credentials', mountPath: CREDENTIALS, readOnly: true },
      { name: 'ctrlmesh-pod-info', mountPath: '/etc/ctrlmesh/pod-info', readOnly: true },
    ]);
    // The pod's own labels, kept by the kubelet: which CircuitBreakers and FaultInjections select this proxy.
    expect(created.spec?.volumes?.find((v) => v.name === 'ctrlmesh-pod-info')?.downwardAPI).toMatchObject({
      items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }],
    });
    expect(created.spec?.volumes?.find((v) => v.name === 'ctrlmesh-kubeconfig')?.emptyDir).toEqual({});
    // The shard's own Secret of the pod's namespace, in the proxy alone, owner-read only: no other shard's identity.
    expect(created.spec?.volumes?.find((v) => v.name === 'ctrlmesh-proxy-credentials')?.secret).toEqual({
      secretName: `${PROXY_SECRET}.${registryName}.demo`,
      items: [
        { key: 'kubeconfig', path: 'kubeconfig' },
        { key: 'nats-ca.crt', path: 'nats-ca.crt' },
        { key: 'nats.creds', path: 'nats.creds' },
      ],
      defaultMode: 0o400,
    });
    expect(created.spec?.securityContext?.fsGroup).toBe(1000);
    const [manager, shipper] = created.spec?.containers ?? [];
    expect(manager?.args).toEqual(['--leader-elect', `--kubeconfig=${KUBECONFIG}`]);
    expect(manager?.env).toEqual([{ name: 'KUBECONFIG', value: KUBECONFIG }]);
    expect(manager?.volumeMounts).toContainEqual({ name: 'ctrlmesh-kubeconfig', mountPath: '/var/run/ctrlmesh', readOnly: true });
    expect(shipper?.env).toEqual([{ name: 'LEVEL', value: 'info' }]);
    expect(shipper?.volumeMounts?.some((m) => m.name === 'ctrlmesh-kubeconfig') ?? false).toBe(false);
    expect([manager, shipper].some((c) => c?.volumeMounts?.some((m) => m.name === 'ctrlmesh-proxy-credentials' || m.name === 'ctrlmesh-pod-info'))).toBe(false);
    expect(created.metadata?.annotations?.['ctrlmesh.kusionstack.io/sharding-config']).toBe('demo');
  });

  it("takes the ServiceAccount token out of every container, keeping its CA and namespace files; refuses a token the pod's author projects", async () => {
    // As the ServiceAccount admission plugin leaves a pod before the webhooks run (this bed's API server runs without it).
    const mount = { name: 'kube-api-access-q8r4w', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true };
    const admitted = pod('tokens-0', { app: 'demo', [ENABLE_PROXY_LABEL]: 'true' });
    for (const c of admitted.spec?.containers ?? []) c.volumeMounts = [mount];
    admitted.spec!.volumes = [
      {
        name: mount.name,
        projected: {
          sources: [
            { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
            { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
            { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
          ],
        },
      },
    ];
    const created = await core.createNamespacedPod({ namespace, body: admitted });
    expect(created.spec?.automountServiceAccountToken).toBe(false);
    const sources = created.spec?.volumes?.find((v) => v.name === mount.name)?.projected?.sources ?? [];
    expect(sources.map((s) => Object.keys(s).filter((k) => s[k as keyof typeof s] !== undefined))).toEqual([['configMap'], ['downwardAPI']]);
    for (const c of created.spec?.containers ?? []) expect(c.volumeMounts, c.name).toContainEqual(mount);
    expect(created.spec?.initContainers?.[0]?.volumeMounts?.some((m) => m.name === mount.name)).toBe(false);

    const own = pod('tokens-1', { app: 'demo', [ENABLE_PROXY_LABEL]: 'true' });
    own.spec!.volumes = [{ name: 'vault-token', projected: { sources: [{ serviceAccountToken: { audience: 'vault', path: 'token' } }] } }];
    own.spec!.containers[0]!.volumeMounts = [{ name: 'vault-token', mountPath: '/var/run/vault' }];
    const refusal = await core.createNamespacedPod({ namespace, body: own }).then(
      () => 'created',
      (err: unknown) => String((err as ApiException<string>).body),
    );
    expect(refusal).toContain(`pod ${namespace}/tokens-1: volume vault-token projects a ServiceAccount token`);
  });

  it('leaves an unlabelled pod untouched', async () => {
    const created = await core.createNamespacedPod({ namespace, body: pod('plain-0', { app: 'demo' }) });
    expect(created.spec?.initContainers).toBeUndefined();
    expect(created.spec?.containers?.[0]?.args).toEqual(['--leader-elect']);
    expect(created.spec?.containers?.[0]?.env).toBeUndefined();
    expect(created.metadata?.annotations?.['ctrlmesh.kusionstack.io/sharding-config']).toBeUndefined();
  });

  it('gives a pod of an auto-sharding root the shard its StatefulSet ordinal runs, and refuses any other pod', async () => {
    await apply(kc, {
      apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1',
      kind: 'ShardingConfig',
      metadata: { name: 'sample-root', namespace },
      spec: {
        root: { prefix: 'sample', targetStatefulSet: 'sample', auto: { shardingSize: 2, everyShardReplicas: 1 }, resourceSelector: [{ apiGroups: [''], resources: ['configmaps'] }] },
        controller: { leaderElectionName: 'sample-leader' },
        selector: { matchLabels: { app: 'sample' } },
      },
    });
    const labels = { app: 'sample', [ENABLE_PROXY_LABEL]: 'true' };
    // As the StatefulSet controller creates its pods (no controller-manager runs here to remove an orphan).
    const owned = (name: string): V1Pod => {
      const p = pod(name, labels);
      p.metadata!.ownerReferences = [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'sample', uid: '00000000-0000-0000-0000-0000000000aa', controller: true }];
      return p;
    };
    const created = await core.createNamespacedPod({ namespace, body: owned('sample-1') });
    const [sidecar] = created.spec?.initContainers ?? [];
    expect(sidecar?.args?.filter((a) => /^--(operator|shard)=/.test(a))).toEqual([`--operator=${namespace}/sample-root`, `--shard=${registryName}/sample-2-normal`]);
    const secret = created.spec?.volumes?.find((v) => v.name === 'ctrlmesh-proxy-credentials')?.secret;
    expect(secret?.secretName).toBe(`${PROXY_SECRET}.${registryName}.sample-2-normal`);
    const refused = async (body: V1Pod): Promise<string> =>
      core.createNamespacedPod({ namespace, body }).then(
        () => 'created',
        (err: unknown) => String((err as ApiException<string>).body),
      );
    expect(await refused(owned('stray'))).toContain(`is selected by the auto-sharding root sample-root`);
    // Named like an ordinal pod, but no StatefulSet's: no shard (the name alone would make it the shard of ordinal 0).
    expect(await refused(pod('sample-0', labels))).toContain(`is selected by the auto-sharding root sample-root`);
  });

  it('refuses a labelled pod that two ShardingConfigs select, naming them', async () => {
    await apply(kc, shardingConfig('demo-too', { [ENABLE_PROXY_LABEL]: 'true' }));
    const refusal = await core.createNamespacedPod({ namespace, body: pod('demo-1', { app: 'demo', [ENABLE_PROXY_LABEL]: 'true' }) }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refusal).toBeInstanceOf(ApiException);
    const body = JSON.parse(String((refusal as ApiException<string>).body)) as { code: number; message: string };
    expect(body.code).toBe(403);
    expect(body.message).toContain(
      `pod ${namespace}/demo-1 is selected by 2 ShardingConfigs in namespace ${namespace} (demo, demo-too); exactly one must select it`,
    );
  });

  // Last: it stops the agent.
  it('stopped cleanly, the agent keeps the injection webhook only: a labelled pod created meanwhile is refused, never created without its proxy', async () => {
    await agent?.stop();
    agent = undefined;
    const config = await kc.makeApiClient(AdmissionregistrationV1Api).readMutatingWebhookConfiguration({ name: `ctrlmesh-agent-${registryName}` });
    expect(config.webhooks?.map((w) => w.name)).toEqual(['pods.ctrlmesh.kusionstack.io']);
    const refusal = await core.createNamespacedPod({ namespace, body: pod('while-down', { app: 'demo', [ENABLE_PROXY_LABEL]: 'true' }) }).then(
      () => undefined,
      (err: unknown) => err as ApiException<string>,
    );
    expect((JSON.parse(String(refusal?.body)) as { message: string }).message).toContain('failed calling webhook "pods.ctrlmesh.kusionstack.io"');
    await expect(core.readNamespacedPod({ name: 'while-down', namespace })).rejects.toThrow();
  });
});
