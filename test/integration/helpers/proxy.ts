import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiException, CoreV1Api, KubeConfig, RbacAuthorizationV1Api, type V1PolicyRule } from '@kubernetes/client-node';
import { pino } from 'pino';
import { writeKubeconfig, type ClusterInfo } from '../../../src/dev/index.js';
import { createRegistry } from '../../../src/metrics/index.js';
import {
  DEFAULT_MAX_BODY_BYTES,
  FileRouteSource,
  TableStore,
  loadCredentials,
  operatorKubeconfig,
  startProxy,
  type BreakerOptions,
  type RouteSource,
  type RuleSet,
  type RuleSource,
  type RunningProxy,
} from '../../../src/proxy/index.js';
import { bucketOf } from '../../../src/sharding/index.js';
import type { ClusterRoute, RouteTable } from '../../../src/transport/index.js';

export const HASH_LABEL = 'ctrlmesh.kusionstack.io/shard-hash';
export const silent = pino({ level: 'silent' });

/** The bucket of a namespace under the tables these tests use (KusionStack's hash, 32 buckets). */
export function bucket(namespace: string): number {
  return bucketOf(namespace, { algorithm: 'kusionstack', bucketCount: 32 });
}

/** A unique namespace name whose bucket is not in `avoid`. */
export function namespaceOutside(prefix: string, avoid: ReadonlySet<number>): string {
  for (;;) {
    const name = `${prefix}-${Math.random().toString(36).slice(2, 8)}`;
    if (!avoid.has(bucket(name))) return name;
  }
}

export function clusterRoute(info: Pick<ClusterInfo, 'name' | 'server' | 'caPem'>, buckets: number[], extra: Partial<ClusterRoute> = {}): ClusterRoute {
  return { name: info.name, server: info.server, caPem: info.caPem, buckets: [...buckets].sort((a, b) => a - b), limits: [], ...extra };
}

export function routeTable(options: {
  shard: string;
  version?: number;
  homeCluster: string;
  clusters: ClusterRoute[];
  leaseSeconds?: number;
  /** `<namespace>/<name>`: the leader-election lock is renamed in that namespace only. */
  operator?: string;
}): RouteTable {
  return {
    schema: 1,
    operator: options.operator ?? 'operator-demo/demo',
    shard: options.shard,
    version: options.version ?? 1,
    issuedAt: new Date().toISOString(),
    homeCluster: options.homeCluster,
    leaderElectionName: 'demo-leader',
    hashAlgorithm: 'kusionstack',
    bucketCount: 32,
    labels: { hash: HASH_LABEL, namespace: 'ctrlmesh.kusionstack.io/namespace', control: 'ctrlmesh.kusionstack.io/control' },
    leaseSeconds: options.leaseSeconds ?? 30,
    clusters: options.clusters,
  };
}

export const FAST_BREAKER: BreakerOptions = { errorThresholdPercentage: 50, volumeThreshold: 3, resetTimeoutMs: 1000, rollingCountTimeoutMs: 10_000 };

export interface TestProxy {
  proxy: RunningProxy;
  dir: string;
  tablePath: string;
  storePath: string;
  /** A KubeConfig for the operator side: the proxy's kubeconfig, as `ctrlmesh kubeconfig` writes it. */
  kubeConfig(context?: string): KubeConfig;
  kubeconfigPath: string;
  /** Replaces the route table file atomically (the file source picks it up). */
  writeTable(table: RouteTable): Promise<void>;
  close(): Promise<void>;
}

/** Starts an in-process proxy on 127.0.0.1 (random ports) over a route table file and the bed's credentials. */
export async function startTestProxy(options: {
  table: RouteTable | undefined;
  credentialsPath: string;
  dir?: string;
  rules?: RuleSet;
  /** A live rule source (e.g. `liveRulesFromFiles`, as `ctrlmesh proxy` builds it); instead of `rules`. */
  ruleSource?: RuleSource;
  random?: () => number;
  now?: () => number;
  breaker?: BreakerOptions;
  maxBodyBytes?: number;
  source?: (tablePath: string) => RouteSource;
  /** The API listener's port (default: a free one); a proxy restarted on its port keeps its operator's kubeconfig. */
  apiPort?: number;
}): Promise<TestProxy> {
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'ctrlmesh-proxy-')));
  await mkdir(dir, { recursive: true });
  const tablePath = join(dir, 'table.json');
  const storePath = join(dir, 'store', 'table.json');
  const writeTable = async (table: RouteTable): Promise<void> => {
    await writeFile(`${tablePath}.tmp`, JSON.stringify(table));
    await rename(`${tablePath}.tmp`, tablePath);
  };
  if (options.table) await writeTable(options.table);
  const rules = options.rules;
  const now = options.now ?? Date.now;
  const proxy = await startProxy({
    config: {
      api: { host: '127.0.0.1', port: options.apiPort ?? 0 },
      ops: { host: '127.0.0.1', port: 0 },
      upstream: { headersTimeoutMs: 5000 },
      breaker: options.breaker ?? FAST_BREAKER,
      requests: { maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES, allowImpersonation: false, readTimeoutMs: 60_000 },
      lease: { marginMs: 500 },
      meshSecret: 'ctrlmesh-proxy',
    },
    source: options.source?.(tablePath) ?? new FileRouteSource({ path: tablePath, logger: silent, pollIntervalMs: 100 }),
    store: new TableStore(storePath),
    credentials: loadCredentials(options.credentialsPath),
    registry: createRegistry('proxy'),
    logger: silent,
    now,
    ...(options.random ? { random: options.random } : {}),
    // Fixed rules, given as a source that reports them once.
    ...(rules ? { rules: { description: 'test rules', start: async (handlers) => handlers.onRules(rules), stop: async () => undefined } } : {}),
    ...(options.ruleSource ? { rules: options.ruleSource } : {}),
  });
  const kubeconfigPath = join(dir, 'operator-kubeconfig');
  const current = proxy.controller.current?.table;
  if (current) await writeFile(kubeconfigPath, operatorKubeconfig(current, proxy.apiUrl));
  return {
    proxy,
    dir,
    tablePath,
    storePath,
    kubeconfigPath,
    kubeConfig: (context) => {
      const kc = new KubeConfig();
      kc.loadFromFile(kubeconfigPath);
      if (context) kc.setCurrentContext(context);
      return kc;
    },
    writeTable,
    close: async () => {
      await proxy.close();
      if (!options.dir) await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Retries an assertion until it passes or `timeoutMs` passes (then its last failure is thrown). */
export async function settles(assertion: () => unknown, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await assertion();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

/**
 * Waits until namespace `name` is Active, creating it when absent: a name several files of the shared bed use (like
 * ns-a, where the reference examples' rules apply), so it waits out another file's deletion and is never deleted.
 */
export async function sharedNamespace(core: CoreV1Api, name: string): Promise<void> {
  await settles(async () => {
    const phase = await core.readNamespace({ name }).then(
      (found) => found.status?.phase,
      () => core.createNamespace({ body: { metadata: { name } } }).then((made) => made.status?.phase ?? 'Active'),
    );
    if (phase !== 'Active') throw new Error(`namespace ${name} is ${phase}`);
  }, 60_000);
}

/** A sample's value from the proxy's /metrics, or undefined when it has none. */
export async function metricValue(harness: TestProxy, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const text = await (await fetch(`${harness.proxy.opsUrl}/metrics`)).text();
  const pairs = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && pairs.every((p) => l.includes(p)));
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
}

/** The HTTP status a client-node call ended with (200 when it succeeded). */
export function code(call: Promise<unknown>): Promise<number> {
  return call.then(
    () => 200,
    (err: unknown) => {
      if (err instanceof ApiException) return err.code;
      throw err;
    },
  );
}

/** What an operator's ServiceAccount commonly holds, cluster-wide: its own kinds, no RBAC, webhooks or nodes. */
export const OPERATOR_LIKE_RULES: V1PolicyRule[] = [
  { apiGroups: [''], resources: ['configmaps', 'secrets', 'pods', 'pods/exec', 'pods/log', 'services', 'events', 'serviceaccounts', 'serviceaccounts/token'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
  { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch'] },
  { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] },
  { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
  { apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] },
];

/**
 * A least-privilege identity for a proxy: a ServiceAccount in `namespace` (which must exist) bound to a ClusterRole of
 * `rules` (OPERATOR_LIKE_RULES and any more), as a kubeconfig at `path`. Returns what removes the role and binding.
 */
export async function leastPrivilegeKubeconfig(options: {
  kc: KubeConfig;
  cluster: Pick<ClusterInfo, 'name' | 'server' | 'caPem'>;
  namespace: string;
  name: string;
  path: string;
  rules?: V1PolicyRule[];
}): Promise<() => Promise<void>> {
  const { kc, cluster, namespace, name, path } = options;
  const core = kc.makeApiClient(CoreV1Api);
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createClusterRole({ body: { metadata: { name }, rules: [...OPERATOR_LIKE_RULES, ...(options.rules ?? [])] } });
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  await rbac.createClusterRoleBinding({
    body: { metadata: { name }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name }, subjects: [{ kind: 'ServiceAccount', name, namespace }] },
  });
  const token = await core.createNamespacedServiceAccountToken({ name, namespace, body: { spec: { audiences: [], expirationSeconds: 3600 } } });
  await writeKubeconfig(path, [{ name: cluster.name, server: cluster.server, caPem: cluster.caPem, token: token.status?.token as string }]);
  return async () => {
    await rbac.deleteClusterRoleBinding({ name }).catch(() => undefined);
    await rbac.deleteClusterRole({ name }).catch(() => undefined);
  };
}

/** Who refused a request: the proxy (its own Status), the API server's authorizer (RBAC), or nobody. */
export function refusedBy(res: { status: number; text: string }): 'proxy' | 'rbac' | 'none' {
  if (res.status < 400) return 'none';
  return /is forbidden: User "[^"]+" cannot/u.test(res.text) ? 'rbac' : 'proxy';
}
