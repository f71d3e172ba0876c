import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { AdmissionregistrationV1Api, CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENABLE_PROXY_LABEL, type AgentHandle } from '../../src/agent/index.js';
import { resolveTool } from '../../src/dev/index.js';
import type { HubHandle } from '../../src/hub/index.js';
import { GROUP, apply, bootstrapTokens, ensureNamespace, eventually, privateNats, routeSignerKey, runAgent, runHub } from './control-fixture.js';
import { cluster, kubeConfigFor, uniqueName } from './helpers/testbed.js';

const run = promisify(execFile);

/**
 * The agent chart's ClusterRole is least privilege (test/integration/charts.test.ts holds it to exact rules); this
 * runs a real agent under it, as the chart's ServiceAccount, to show those rules are also enough.
 */
describe("an agent under the agent chart's ClusterRole, in a real API server", () => {
  const bed = cluster(1);
  const registryName = uniqueName('rbac');
  const release = uniqueName('rbac');
  const agentNamespace = uniqueName('agent');
  const operators = uniqueName('operators');
  const admin = kubeConfigFor(bed);
  let kubectl = '';
  let nats: Awaited<ReturnType<typeof privateNats>>;
  let hub: HubHandle;
  let agent: AgentHandle | undefined;

  const kubectlRun = (...args: string[]): Promise<{ stdout: string }> => run(kubectl, ['--kubeconfig', bed.kubeconfigPath, ...args]);

  beforeAll(async () => {
    const helm = (await resolveTool('helm')).path;
    kubectl = (await resolveTool('kubectl')).path;
    await kubectlRun('create', 'namespace', agentNamespace);
    // Helm installs the chart's crds/ before anything else; the agent only updates them (it may not create CRDs).
    await kubectlRun('apply', '--server-side', '--force-conflicts', '-f', 'charts/ctrlmesh-agent/crds/');
    const { stdout: rbac } = await run(helm, [
      'template',
      release,
      'charts/ctrlmesh-agent',
      '--namespace',
      agentNamespace,
      '--show-only',
      'templates/rbac.yaml',
      '--set',
      `clusterName=${registryName}`,
      '--set',
      // apiGroups omitted: the core group (`--set` cannot write an empty string in a list).
      'rbac.relatedResources[0].resources={configmaps}',
    ]);
    await new Promise<void>((resolve, reject) => {
      const child = execFile(kubectl, ['--kubeconfig', bed.kubeconfigPath, '--namespace', agentNamespace, 'apply', '-f', '-'], (err) => (err ? reject(err) : resolve()));
      child.stdin?.end(rbac);
    });
    // The ServiceAccount's own token, as its pod would have it.
    const { stdout: token } = await kubectlRun('--namespace', agentNamespace, 'create', 'token', `${release}-ctrlmesh-agent`, '--duration=1h');
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: bed.name, server: bed.server, caData: Buffer.from(bed.caPem).toString('base64') }],
      users: [{ name: 'agent', token: token.trim() }],
      contexts: [{ name: 'agent', cluster: bed.name, user: 'agent' }],
      currentContext: 'agent',
    });

    nats = await privateNats();
    hub = await runHub(nats.nats, uniqueName('hub'), { tokens: bootstrapTokens(registryName) });
    agent = await runAgent({
      registryName,
      bed,
      nats: nats.nats,
      kc,
      sidecar: { image: 'controllermesh:rbac-test', routeSigners: [routeSignerKey(nats.nats)], secretName: 'ctrlmesh-proxy' },
    });
  }, 300_000);

  afterAll(async () => {
    await agent?.stop();
    await hub?.stop();
    await nats?.cleanup();
    await admin
      .makeApiClient(AdmissionregistrationV1Api)
      .deleteMutatingWebhookConfiguration({ name: `ctrlmesh-agent-${registryName}` })
      .catch(() => undefined);
    if (kubectl) {
      await kubectlRun('delete', 'clusterrole,clusterrolebinding', `${release}-ctrlmesh-agent`, '--ignore-not-found').catch(() => undefined);
      await kubectlRun('delete', 'namespace', agentNamespace, operators, '--wait=false', '--ignore-not-found').catch(() => undefined);
    }
  });

  it('registers, labels namespaces and related objects, writes statuses, registers its webhook and injects the proxy', async () => {
    await eventually(() => expect(hub.status().clusters.find((c) => c.name === registryName)?.health).toBe('Ready'), 30_000);
    await ensureNamespace(admin, operators);
    await apply(admin, {
      apiVersion: `${GROUP}/v1alpha1`,
      kind: 'ShardingConfig',
      metadata: { name: 'demo', namespace: operators },
      spec: {
        selector: { matchLabels: { app: 'demo' } },
        controller: { leaderElectionName: 'demo-leader' },
        limits: [{ relateResources: [{ apiGroups: [''], resources: ['configmaps'] }], selector: { matchLabels: { app: 'demo' } } }],
      },
    });
    const core = admin.makeApiClient(CoreV1Api);
    await core.createNamespacedConfigMap({ namespace: operators, body: { metadata: { name: 'settings' }, data: { a: '1' } } });

    await eventually(async () => {
      const ns = await core.readNamespace({ name: operators });
      expect(ns.metadata?.labels?.['ctrlmesh.kusionstack.io/control']).toBe('true');
      const cm = await core.readNamespacedConfigMap({ namespace: operators, name: 'settings' });
      expect(cm.metadata?.labels?.['ctrlmesh.kusionstack.io/sharding-hash']).toBeDefined();
    }, 30_000);
    await eventually(async () => {
      const config = (await admin
        .makeApiClient(CustomObjectsApi)
        .getNamespacedCustomObject({ group: GROUP, version: 'v1alpha1', namespace: operators, plural: 'shardingconfigs', name: 'demo' })) as {
        status?: { conditions?: { type: string }[] };
      };
      expect(config.status?.conditions?.length ?? 0).toBeGreaterThan(0);
    }, 30_000);
    // A CircuitBreaker's status too (circuitbreakers/status: patch), with the condition naming the field at fault.
    await admin.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group: GROUP,
      version: 'v1alpha1',
      namespace: operators,
      plural: 'circuitbreakers',
      body: {
        apiVersion: `${GROUP}/v1alpha1`,
        kind: 'CircuitBreaker',
        metadata: { name: 'limits' },
        spec: { trafficInterceptRules: [{ name: 'x', interceptType: 'Blacklist', contentType: 'Regexp', contents: ['('] }] },
      },
    });
    await eventually(async () => {
      const rule = (await admin
        .makeApiClient(CustomObjectsApi)
        .getNamespacedCustomObject({ group: GROUP, version: 'v1alpha1', namespace: operators, plural: 'circuitbreakers', name: 'limits' })) as {
        status?: { conditions?: { type: string; status: string; message: string }[]; proxies?: unknown[] };
      };
      expect(rule.status?.conditions?.find((c) => c.type === 'Invalid')).toMatchObject({ status: 'True', message: expect.stringMatching(/^spec\.trafficInterceptRules\[0\]\.contents\[0\]: /) });
      expect(rule.status?.proxies).toEqual([]);
    }, 30_000);
    await eventually(async () => {
      const hook = await admin.makeApiClient(AdmissionregistrationV1Api).readMutatingWebhookConfiguration({ name: `ctrlmesh-agent-${registryName}` });
      expect(hook.webhooks?.map((w) => w.name)).toEqual(
        expect.arrayContaining(['namespaces.ctrlmesh.kusionstack.io', 'objects.ctrlmesh.kusionstack.io', 'pods.ctrlmesh.kusionstack.io']),
      );
    }, 30_000);

    const pod = await core.createNamespacedPod({
      namespace: operators,
      body: {
        metadata: { name: 'demo-0', labels: { app: 'demo', [ENABLE_PROXY_LABEL]: 'true' } },
        spec: { containers: [{ name: 'manager', image: 'operator:1' }] },
      },
    });
    expect(pod.spec?.initContainers?.[0]?.name).toBe('ctrlmesh-proxy');
  });

  it('cuts its webhook configuration down to the fail-closed injection webhook when it stops (update, by name)', async () => {
    await agent?.stop();
    agent = undefined;
    const kept = await admin.makeApiClient(AdmissionregistrationV1Api).readMutatingWebhookConfiguration({ name: `ctrlmesh-agent-${registryName}` });
    expect(kept.webhooks?.map((w) => w.name)).toEqual(['pods.ctrlmesh.kusionstack.io']);
  });

  it('cannot read Secrets', async () => {
    const { stdout } = await kubectlRun('auth', 'can-i', 'list', 'secrets', '--as', `system:serviceaccount:${agentNamespace}:${release}-ctrlmesh-agent`).catch(
      (err: { stdout: string }) => ({ stdout: err.stdout }),
    );
    expect(stdout.trim()).toBe('no');
  });
});
