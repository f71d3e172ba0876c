import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { API_GROUP, API_VERSION } from '../api/index.js';
import { freePort, httpOk, packageRoot, ServerProcess, startTestbed, TestbedError, type Testbed } from '../dev/index.js';
import { writeRoleCreds, type AuthFiles } from '../transport/auth/index.js';
import { ensureNamespace, isApiStatus } from '../kube/index.js';
import { createCertificateAuthority, issueCertificate } from '../tls/index.js';
import { agentCommandArgs, hubCommandArgs } from '../transport/command-lines.js';
import { proxyCommandArgs } from '../transport/proxy-command.js';

/** The annotation the sample operator stamps on what it reconciles (src/sample-operator). */
const RECONCILED_BY = 'demo.ctrlmesh.io/reconciled-by';

/** The demo's operator: its namespace and root ShardingConfig in the first cluster, spanning every cluster. */
export const DEMO_NAMESPACE = 'operator-demo';
const DEMO_ROOT = 'demo-root';
export const DEMO_OPERATOR = `${DEMO_NAMESPACE}/${DEMO_ROOT}`;

export interface DemoMeshOptions {
  dir: string;
  clusters: number;
  shards: number;
  /** Namespaces with a demo ConfigMap, per cluster: the operator's work. */
  workloadNamespaces: number;
  /** CircuitBreaker / FaultInjection manifests every proxy loads (`ctrlmesh proxy --rules`). */
  ruleFiles?: string[];
  /** Every shard's operator serves its validating webhook, behind its proxy's webhook listener (`DemoShard.webhookUrl`). */
  webhook?: boolean;
  onProgress: (message: string) => void;
  logger: Logger;
  signal?: AbortSignal;
}

export interface DemoShard {
  name: string;
  /** The HTTP proxy for the operator's external REST calls (judged by the CircuitBreaker traffic rules). */
  egressUrl: string;
  /** The proxy's API URL (what the operator talks to) and its /healthz /readyz /metrics. */
  apiUrl: string;
  opsUrl: string;
  /** With `webhook`: the proxy's admission webhook listener (TLS, verified with `DemoMesh.webhook`). */
  webhookUrl?: string;
}

export interface DemoMesh {
  bed: Testbed;
  hubUrl: string;
  agents: { cluster: string; url: string }[];
  shards: DemoShard[];
  /** With `webhook`: the webhook certificate's CA and the name it is issued for, to call the proxies' listeners. */
  webhook?: { caPem: string; serverName: string };
  /** Stops every process and the test bed, newest first. */
  stop(): Promise<void>;
}

const CLI = (): string => join(packageRoot(), 'dist', 'src', 'cli', 'main.js');
const SAMPLE_OPERATOR = (): string => join(packageRoot(), 'dist', 'src', 'sample-operator', 'main.js');

interface ChildOptions {
  name: string;
  script: string;
  args: string[];
  dir: string;
  probeUrl?: string;
  logger: Logger;
  signal?: AbortSignal;
}

/** A node script of this package as a server process of the bed (parent-death signal, log file, pid file). */
async function startChild(options: ChildOptions): Promise<ServerProcess> {
  const probeUrl = options.probeUrl;
  const child = new ServerProcess({
    name: options.name,
    binary: process.execPath,
    args: [options.script, ...options.args],
    dir: options.dir,
    logFileName: `${options.name.replaceAll('/', '_')}.log`,
    probe: probeUrl ? () => httpOk(probeUrl) : async () => true,
    readyTimeoutMs: 60_000,
    stopTimeoutMs: 10_000,
    logger: options.logger,
  });
  await child.start(options.signal);
  return child;
}

/** Runs one CLI command to completion (e.g. `ctrlmesh kubeconfig`). */
async function runCli(args: string[]): Promise<void> {
  await promisify(execFile)(process.execPath, [CLI(), ...args]);
}

/** The name of the demo webhook's certificate (as a Service of the operator would be reached). */
const DEMO_WEBHOOK_NAME = `sample-operator.${DEMO_NAMESPACE}.svc`;
/** spec.webhook.port of the demo root: where the operators would serve in pods (on 127.0.0.1 each has its own). */
const DEMO_WEBHOOK_PORT = 9443;

/** The webhook certificate every shard shares, in `certDir` as controller-runtime reads it; its CA. */
async function writeWebhookCerts(certDir: string): Promise<string> {
  const ca = await createCertificateAuthority({ commonName: 'demo-webhook-ca' });
  const serving = await issueCertificate({ ca, commonName: DEMO_WEBHOOK_NAME, dnsNames: [DEMO_WEBHOOK_NAME], usage: 'server' });
  await mkdir(certDir, { recursive: true });
  await writeFile(join(certDir, 'tls.crt'), serving.certPem);
  await writeFile(join(certDir, 'tls.key'), serving.keyPem, { mode: 0o600 });
  await writeFile(join(certDir, 'ca.crt'), ca.certPem);
  return ca.certPem;
}

function demoRoot(shards: number, certDir: string | undefined): object {
  return {
    apiVersion: API_VERSION,
    kind: 'ShardingConfig',
    metadata: { name: DEMO_ROOT, namespace: DEMO_NAMESPACE },
    spec: {
      root: {
        prefix: 'demo',
        targetStatefulSet: 'sample-operator',
        auto: { shardingSize: shards, everyShardReplicas: 1 },
        resourceSelector: [{ apiGroups: [''], resources: ['configmaps'] }],
        // Every registered cluster: the planner spreads the (cluster, bucket) units over the shards.
        clusters: {},
      },
      controller: { leaderElectionName: 'demo-leader', multicluster: true },
      selector: { matchLabels: { app: 'sample-operator' } },
      ...(certDir ? { webhook: { certDir, port: DEMO_WEBHOOK_PORT } } : {}),
    },
  };
}

const MESH_LABEL_PREFIX = 'ctrlmesh.kusionstack.io/';

/** The mesh labels (bucket, namespace) the cluster's agent gave a namespace, once it has. */
async function meshLabels(core: CoreV1Api, namespace: string): Promise<Record<string, string>> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const labels = (await core.readNamespace({ name: namespace })).metadata?.labels ?? {};
    const mesh = Object.fromEntries(Object.entries(labels).filter(([k]) => k.startsWith(MESH_LABEL_PREFIX)));
    if (Object.keys(mesh).length > 0) return mesh;
    if (Date.now() > deadline) throw new TestbedError(`the agent did not label namespace ${namespace} within 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * The demo namespaces, each with a ConfigMap app=demo, and, in the home cluster, the root. The agent of a cluster
 * labels the objects of the resources its own ShardingConfigs name; the other clusters have none, so their
 * ConfigMaps get their namespace's mesh labels here, as that agent's webhook would copy them.
 */
async function applyWorkload(kc: KubeConfig, namespaces: number, root: object | undefined): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const ignoreConflict = (err: unknown): void => {
    if (!isApiStatus(err, 409)) throw err;
  };
  const names = Array.from({ length: namespaces }, (_, i) => `demo-${i}`);
  for (const name of [DEMO_NAMESPACE, ...names]) await ensureNamespace(core, name);
  if (root) {
    await kc
      .makeApiClient(CustomObjectsApi)
      .createNamespacedCustomObject({ group: API_GROUP, version: 'v1alpha1', namespace: DEMO_NAMESPACE, plural: 'shardingconfigs', body: root })
      .catch(ignoreConflict);
  }
  for (const [i, namespace] of names.entries()) {
    const labels = { app: 'demo', ...(root ? {} : await meshLabels(core, namespace)) };
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'settings', labels }, data: { n: String(i) } } }).catch(ignoreConflict);
  }
}

/**
 * Keeps the operator busy: each tick changes one demo ConfigMap per cluster (round robin over the namespaces) and
 * drops the operator's stamp, so the shard that owns it writes it again through its proxy.
 */
async function generateWork(bed: Testbed, namespaces: number, signal: AbortSignal): Promise<void> {
  const apis = bed.info.clusters.map((c) => {
    const kc = new KubeConfig();
    kc.loadFromFile(c.kubeconfigPath);
    return kc.makeApiClient(CoreV1Api);
  });
  const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
  for (let tick = 0; !signal.aborted; tick++) {
    const namespace = `demo-${tick % namespaces}`;
    const body = { data: { tick: String(tick) }, metadata: { annotations: { [RECONCILED_BY]: null } } };
    // A failed write (an API server restarting) is simply retried at a later tick.
    await Promise.all(apis.map((api) => api.patchNamespacedConfigMap({ name: 'settings', namespace, body }, mergePatch).catch(() => undefined)));
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** The shard names the hub has published for the demo operator, once there are `count` of them. */
async function publishedShards(hubUrl: string, count: number, signal?: AbortSignal): Promise<string[]> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    signal?.throwIfAborted();
    const status = (await fetch(`${hubUrl}/status`).then((r) => r.json())) as { operators: { operator: string; shards: { name: string }[] }[] };
    const shards = status.operators.find((o) => o.operator === DEMO_OPERATOR)?.shards.map((s) => s.name) ?? [];
    if (shards.length === count) return shards;
    if (Date.now() > deadline) throw new TestbedError(`the hub published ${shards.length} of ${count} shards of ${DEMO_OPERATOR} within 60 s; see ${hubUrl}/status`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Where every demo process finds NATS (URLs and TLS CA), and the bed's identities. */
function demoNats(bed: Testbed): { nats: readonly string[]; natsCa: string; auth: AuthFiles } {
  const security = bed.info.nats.security;
  if (!security) throw new TestbedError('the demo bed runs NATS without security');
  return { nats: bed.info.nats.urls, natsCa: security.caFile, auth: security.auth };
}

/**
 * The demo: a test bed, the hub, an agent per cluster, and the sample operator as `shards` shards, each behind its
 * own proxy, for an auto-sharding root spanning every cluster. Everything runs as separate processes on 127.0.0.1;
 * each proxy follows its shard's route table in the hub's NATS KV and acknowledges what it applies.
 */
export async function startDemoMesh(options: DemoMeshOptions): Promise<DemoMesh> {
  const { dir, logger, onProgress, signal } = options;
  const stack: (() => Promise<void>)[] = [];
  const stop = async (): Promise<void> => {
    for (const step of stack.reverse()) await step().catch((err: unknown) => logger.warn({ err }, 'demo: stopping a part failed'));
    stack.length = 0;
  };
  try {
    const bed = await startTestbed({ clusters: options.clusters, dir: join(dir, 'bed'), onProgress, ...(signal ? { signal } : {}) });
    stack.push(() => bed.down());
    const { nats, natsCa, auth } = demoNats(bed);
    // One bootstrap token per cluster, bound to it: the hub's file lists them all, each agent gets its own.
    const tokens = new Map(bed.info.clusters.map((c) => [c.name, randomBytes(16).toString('hex')]));
    const tokenFile = join(dir, 'tokens');
    await writeFile(tokenFile, [...tokens].map(([cluster, token]) => `${cluster} ${token}\n`).join(''), { mode: 0o600 });

    const hubPort = await freePort();
    const hubUrl = `http://127.0.0.1:${hubPort}`;
    onProgress(`starting the hub on ${hubUrl}`);
    const hub = await startChild({
      name: 'hub',
      script: CLI(),
      args: hubCommandArgs({
        nats,
        natsCa,
        natsCreds: auth.hubCreds,
        signingKey: auth.routeSigningSeed,
        agentIssuer: auth.issuerSeed,
        tokenFile,
        listen: `127.0.0.1:${hubPort}`,
        proxyLeaseSeconds: 5,
      }),
      dir: join(dir, 'hub'),
      probeUrl: `${hubUrl}/healthz`,
      logger,
      ...(signal ? { signal } : {}),
    });
    stack.push(() => hub.stop());

    const agents: DemoMesh['agents'] = [];
    for (const cluster of bed.info.clusters) {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      onProgress(`starting the agent of ${cluster.name} on ${url}`);
      const agentTokenFile = join(dir, `token-${cluster.name}`);
      await writeFile(agentTokenFile, `${tokens.get(cluster.name) ?? ''}\n`, { mode: 0o600 });
      const agent = await startChild({
        name: `agent-${cluster.name}`,
        script: CLI(),
        args: agentCommandArgs({
          cluster: cluster.name,
          kubeconfig: cluster.kubeconfigPath,
          nats,
          natsCa,
          natsCreds: auth.bootstrapCreds,
          tokenFile: agentTokenFile,
          listen: `127.0.0.1:${port}`,
          webhookListen: `127.0.0.1:${await freePort()}`,
        }),
        dir: join(dir, 'agents', cluster.name),
        probeUrl: `${url}/readyz`,
        logger,
        ...(signal ? { signal } : {}),
      });
      stack.push(() => agent.stop());
      agents.push({ cluster: cluster.name, url });
    }

    onProgress(`applying the auto-sharding root ${DEMO_OPERATOR} (${options.shards} shards over ${bed.info.clusters.length} clusters) and the workload`);
    const certDir = options.webhook ? join(dir, 'webhook-certs') : undefined;
    const webhook = certDir ? { caPem: await writeWebhookCerts(certDir), serverName: DEMO_WEBHOOK_NAME } : undefined;
    for (const [i, cluster] of bed.info.clusters.entries()) {
      const kc = new KubeConfig();
      kc.loadFromFile(cluster.kubeconfigPath);
      await applyWorkload(kc, options.workloadNamespaces, i === 0 ? demoRoot(options.shards, certDir) : undefined);
    }
    const shardNames = await publishedShards(hubUrl, options.shards, signal);

    const shards: DemoShard[] = [];
    for (const shard of shardNames) {
      const shardDir = join(dir, 'shards', shard.replaceAll('/', '_'));
      await mkdir(shardDir, { recursive: true });
      const storeFile = join(shardDir, 'route-table.json');
      const [apiPort, opsPort, egressPort] = [await freePort(), await freePort(), await freePort()];
      const apiUrl = `http://127.0.0.1:${apiPort}`;
      const opsUrl = `http://127.0.0.1:${opsPort}`;
      // The operator's webhook port and the proxy's listener in front of it.
      const hook = certDir ? { operatorPort: await freePort(), listenPort: await freePort(), certDir } : undefined;
      onProgress(`starting the proxy of shard ${shard} on ${apiUrl} (ops ${opsUrl}) and its operator`);
      const proxy = await startChild({
        name: `proxy-${shard}`,
        script: CLI(),
        args: proxyCommandArgs({
          nats,
          natsCa,
          natsCreds: await writeRoleCreds(auth, { role: 'proxy', operator: DEMO_OPERATOR, shard }),
          routeSigners: [auth.routeSigningPublicKey],
          operator: DEMO_OPERATOR,
          shard,
          listen: `127.0.0.1:${apiPort}`,
          opsListen: `127.0.0.1:${opsPort}`,
          store: storeFile,
          credentials: bed.info.kubeconfigPath,
          egressListen: `127.0.0.1:${egressPort}`,
          rules: options.ruleFiles ?? [],
          ...(hook ? { webhookListen: `127.0.0.1:${hook.listenPort}`, webhookPort: hook.operatorPort, webhookCertDir: hook.certDir } : {}),
        }),
        dir: join(shardDir, 'proxy'),
        probeUrl: `${opsUrl}/readyz`,
        logger,
        ...(signal ? { signal } : {}),
      });
      stack.push(() => proxy.stop());
      const operatorKubeconfig = join(shardDir, 'operator-kubeconfig');
      // Ready means a route table is applied and stored: the operator's kubeconfig lists its clusters.
      await runCli(['kubeconfig', `--route-table=${storeFile}`, `--port=${apiPort}`, `--out=${operatorKubeconfig}`, '--log-level=warn']);
      const operator = await startChild({
        name: `operator-${shard}`,
        script: SAMPLE_OPERATOR(),
        args: [
          '--kubeconfig',
          operatorKubeconfig,
          '--shard',
          shard,
          '--contexts',
          bed.info.clusters.map((c) => c.name).join(','),
          ...(hook ? ['--webhook-port', String(hook.operatorPort), '--cert-dir', hook.certDir] : []),
        ],
        dir: join(shardDir, 'operator'),
        logger,
        ...(signal ? { signal } : {}),
      });
      stack.push(() => operator.stop());
      shards.push({ name: shard, apiUrl, opsUrl, egressUrl: `http://127.0.0.1:${egressPort}`, ...(hook ? { webhookUrl: `https://127.0.0.1:${hook.listenPort}` } : {}) });
    }
    const work = new AbortController();
    const working = generateWork(bed, options.workloadNamespaces, work.signal);
    stack.push(async () => {
      work.abort();
      await working;
    });
    return { bed, hubUrl, agents, shards, ...(webhook ? { webhook } : {}), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
