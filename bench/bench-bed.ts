import type { ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import type { Dispatcher } from 'undici';
import type { ApiServerHandle, EtcdHandle } from '../src/dev/index.js';
import type { ClusterRoute, RouteTable } from '../src/transport/index.js';

/** What a proxy benchmark starts: closed and removed together, whatever got started before a failure. */
export interface BenchBed {
  dir: string;
  pools: Dispatcher[];
  children: ChildProcess[];
  etcd?: EtcdHandle;
  server?: ApiServerHandle;
}

export async function stopBenchBed(bed: BenchBed): Promise<void> {
  await Promise.all(bed.pools.map((p) => p.close()));
  for (const child of bed.children) child.kill('SIGTERM');
  await bed.server?.stop();
  await bed.etcd?.stop();
  await rm(bed.dir, { recursive: true, force: true });
}

/** The one shard's route table a benchmarked proxy serves: one cluster, the bench's server, its labels. */
export function benchRouteTable(
  server: ApiServerHandle,
  options: { hashAlgorithm: RouteTable['hashAlgorithm']; hashLabel: string; route: Pick<ClusterRoute, 'buckets'> & Partial<ClusterRoute> },
): RouteTable {
  return {
    schema: 1,
    operator: 'bench/bench',
    shard: 'bench-0',
    version: 1,
    issuedAt: new Date().toISOString(),
    homeCluster: server.name,
    hashAlgorithm: options.hashAlgorithm,
    bucketCount: 32,
    labels: { hash: options.hashLabel, namespace: 'ctrlmesh.kusionstack.io/namespace', control: 'ctrlmesh.kusionstack.io/control' },
    leaseSeconds: 30,
    clusters: [{ name: server.name, server: server.server, caPem: server.caPem, limits: [], ...options.route }],
  };
}

/** How the bench's proxies and direct calls authenticate to the API server (BENCH_PROXY_CREDENTIALS). */
export type BenchCredentials = 'token' | 'client-certificate';

export function benchCredentials(): BenchCredentials {
  const chosen = process.env.BENCH_PROXY_CREDENTIALS ?? 'token';
  if (chosen !== 'token' && chosen !== 'client-certificate') throw new Error(`BENCH_PROXY_CREDENTIALS must be token or client-certificate, not "${chosen}"`);
  return chosen;
}

/**
 * A bearer token of a ServiceAccount bound to cluster-admin and exempt from API Priority and Fairness, as the admin
 * is, from the TokenRequest API: how a deployed sidecar is
 * best given its credentials (docs/install.md, The proxy Secret). A client certificate costs the API server a second
 * signature check per request from any OpenSSL client, Node's included (bench/results/history.md, 2026-11-27).
 */
export async function serviceAccountToken(admin: Dispatcher): Promise<string> {
  const post = async (path: string, object: unknown): Promise<unknown> => {
    const res = await admin.request({ method: 'POST', path, headers: { 'content-type': 'application/json' }, body: JSON.stringify(object) });
    const text = await res.body.text();
    if (res.statusCode >= 300) throw new Error(`POST ${path}: ${res.statusCode} ${text}`);
    return JSON.parse(text) as unknown;
  };
  await post('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'ctrlmesh-bench' } });
  await post('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    metadata: { name: 'ctrlmesh-bench' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
    subjects: [{ kind: 'ServiceAccount', name: 'ctrlmesh-bench', namespace: 'default' }],
  });
  // API Priority and Fairness exempts the admin (system:masters) and would queue and refuse (429) a ServiceAccount's
  // storm of watches: the same level for the token, so the two credentials differ in authentication alone.
  await post('/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas', {
    metadata: { name: 'ctrlmesh-bench' },
    spec: {
      priorityLevelConfiguration: { name: 'exempt' },
      matchingPrecedence: 100,
      rules: [
        {
          subjects: [{ kind: 'ServiceAccount', serviceAccount: { name: 'ctrlmesh-bench', namespace: 'default' } }],
          resourceRules: [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'], clusterScope: true, namespaces: ['*'] }],
          nonResourceRules: [{ verbs: ['*'], nonResourceURLs: ['*'] }],
        },
      ],
    },
  });
  const answer = (await post('/api/v1/namespaces/default/serviceaccounts/ctrlmesh-bench/token', { spec: { expirationSeconds: 6 * 3600 } })) as { status?: { token?: unknown } };
  const token = answer.status?.token;
  if (typeof token !== 'string' || token === '') throw new Error('the TokenRequest answered no token');
  return token;
}

/** Adds `authorization: Bearer <token>` to every request a dispatcher sends. */
export function bearer(token: string): Dispatcher.DispatcherComposeInterceptor {
  return (dispatch) => (options, handler) => dispatch({ ...options, headers: { ...(options.headers as Record<string, string> | undefined), authorization: `Bearer ${token}` } }, handler);
}
