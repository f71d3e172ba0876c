import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { pino, type Logger } from 'pino';
import { AGENT_DEFAULTS, startAgent, type AgentHandle, type AgentOptions } from '../../src/agent/index.js';
import { natsClientConfig, natsUrls, startNats, type ClusterInfo, type NatsEndpoint, type NatsHandle, type NatsSecurity } from '../../src/dev/index.js';
import { HUB_DEFAULTS, startHub, type HubHandle, type HubOptions } from '../../src/hub/index.js';
import { Buckets, Keys, acknowledge, connectNats, natsConnectionOptions, openRouteTable, type NatsClientConfig, type RouteTable } from '../../src/transport/index.js';
import { ensureNamespace as ensureNamespaceOf, isApiStatus } from '../../src/kube/index.js';
import { kubeConfigFor } from './helpers/testbed.js';

export const GROUP = 'ctrlmesh.kusionstack.io';

/** Test logs are silent unless CTRLMESH_TEST_LOG names a level (e.g. debug). */
export const logger: Logger = pino({ level: process.env.CTRLMESH_TEST_LOG ?? 'silent' });

export const TOKEN = 'test-bootstrap-token';

/** The hub's bootstrap tokens for these clusters: each registers with TOKEN, bound to its own name. */
export function bootstrapTokens(...clusters: string[]): HubOptions['tokens'] {
  return clusters.map((cluster) => ({ cluster, token: TOKEN }));
}

/** The bed's security: tests run NATS with TLS and JWT auth, as production does. */
export function security(nats: NatsEndpoint): NatsSecurity {
  if (!nats.security) throw new Error(`NATS at ${nats.url} runs without security; tests expect TLS and auth`);
  return nats.security;
}

const seed = (path: string): string => readFileSync(path, 'utf8').trim();

/** The hub's connection: TLS and the hub's creds. */
export function hubNatsConfig(nats: NatsEndpoint): NatsClientConfig {
  const { auth, caFile } = security(nats);
  return { servers: natsUrls(nats), tls: { caFile }, credentials: { kind: 'creds', file: auth.hubCreds } };
}

/** The public key proxies trust: the hub's route-signing key. */
export function routeSignerKey(nats: NatsEndpoint): string {
  return security(nats).auth.routeSigningPublicKey;
}

/** A raw client with the hub's identity, to look at what the control plane stored. */
export async function observe(nats: NatsEndpoint, extra: { maxReconnectAttempts?: number; reconnectTimeWait?: number } = {}): Promise<NatsConnection> {
  return connect({ ...natsConnectionOptions(hubNatsConfig(nats)), ...extra });
}

/** A proxy's connection: TLS and the creds of its shard alone. */
export async function proxyNatsConfig(nats: NatsEndpoint, operator: string, shard: string): Promise<NatsClientConfig> {
  return natsClientConfig(nats, { role: 'proxy', operator, shard });
}

/** A NATS server of the test's own, so stopping it disturbs no other file. */
export async function privateNats(): Promise<{ nats: NatsHandle; cleanup(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-control-nats-'));
  const nats = await startNats({ dir });
  return {
    nats,
    async cleanup() {
      await nats.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Short thresholds so failures show within seconds. */
export function hubOptions(nats: NatsEndpoint, identity: string, overrides: Partial<HubOptions> = {}): HubOptions {
  const { auth } = security(nats);
  return {
    ...HUB_DEFAULTS,
    nats: hubNatsConfig(nats),
    tokens: [],
    signingSeed: seed(auth.routeSigningSeed),
    agentIssuer: { seed: seed(auth.issuerSeed), account: auth.accountPublicKey },
    identity,
    leaseTtlMs: 3_000,
    leaseRenewMs: 1_000,
    health: { unknownAfterMs: 2_000, offlineAfterMs: 5_000 },
    debounceMs: 50,
    proxyLeaseSeconds: 3,
    listen: { host: '127.0.0.1', port: 0 },
    ...overrides,
  };
}

type AgentFixtureOptions = { registryName: string; bed: ClusterInfo; nats: NatsEndpoint; kc?: KubeConfig } & Partial<Omit<AgentOptions, 'cluster' | 'nats'>>;

/** An agent of the bed's cluster `bed`, registered as `registryName` with the bootstrap identity and TOKEN. */
export function agentOptions(options: AgentFixtureOptions): AgentOptions {
  const { registryName, bed, nats, kc: _kc, ...overrides } = options;
  const { auth, caFile } = security(nats);
  return {
    ...AGENT_DEFAULTS,
    cluster: registryName,
    clusterLabels: { testbed: bed.name },
    nats: { servers: natsUrls(nats), tls: { caFile }, credentials: { kind: 'creds', file: auth.bootstrapCreds } },
    token: TOKEN,
    hash: { algorithm: 'kusionstack' },
    heartbeatMs: 500,
    reportRepeatMs: 1_000,
    debounceMs: 50,
    webhook: { host: '127.0.0.1', port: 0 },
    listen: { host: '127.0.0.1', port: 0 },
    ...overrides,
  };
}

export async function runHub(nats: NatsEndpoint, identity: string, overrides: Partial<HubOptions> = {}): Promise<HubHandle> {
  return startHub(hubOptions(nats, identity, overrides), { logger: logger.child({ hub: identity }) });
}

export async function runAgent(options: AgentFixtureOptions): Promise<AgentHandle> {
  return startAgent(agentOptions(options), { kc: options.kc ?? kubeConfigFor(options.bed), logger: logger.child({ agent: options.registryName }) });
}

/** Retries an assertion until it passes or the time is up (then throws its last failure). */
export async function eventually<T>(check: () => T | Promise<T>, timeoutMs = 20_000, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }
}

/** Deletes the ShardingConfigs of `names` in a namespace, if there (a test's clean-up). */
export async function deleteShardingConfigs(kc: KubeConfig, namespace: string, ...names: string[]): Promise<void> {
  const api = kc.makeApiClient(CustomObjectsApi);
  for (const name of names) {
    await api.deleteNamespacedCustomObject({ group: GROUP, version: 'v1alpha1', namespace, plural: 'shardingconfigs', name }).catch(() => undefined);
  }
}

export async function ensureNamespace(kc: KubeConfig, name: string): Promise<void> {
  await ensureNamespaceOf(kc.makeApiClient(CoreV1Api), name);
}

/** A hand-written (KusionStack-style) config owning the given buckets (values of label `key`) of its cluster. */
export function handWrittenConfig(namespace: string, name: string, buckets: string[], key: string): KubernetesObject & { spec: unknown } {
  return {
    apiVersion: `${GROUP}/v1alpha1`,
    kind: 'ShardingConfig',
    metadata: { name, namespace },
    spec: {
      selector: { matchLabels: { app: name } },
      limits: [{ relateResources: [{ apiGroups: [''], resources: ['configmaps'] }], selector: { matchExpressions: [{ key, operator: 'In', values: buckets }] } }],
    },
  };
}

/** An auto-sharding root `roll` of `size` shards over configmaps, in `namespace`: one operator, several shards. */
export function rollRoot(namespace: string, size: number): KubernetesObject & { spec: unknown } {
  return {
    apiVersion: `${GROUP}/v1alpha1`,
    kind: 'ShardingConfig',
    metadata: { name: 'roll', namespace },
    spec: {
      root: { prefix: 'roll', targetStatefulSet: 'roll', auto: { shardingSize: size, everyShardReplicas: 1 }, resourceSelector: [{ apiGroups: [''], resources: ['configmaps'] }] },
      selector: { matchLabels: { app: 'roll' } },
    },
  };
}

/** Each table's version by shard. */
export function versions(tables: readonly RouteTable[]): Record<string, number> {
  return Object.fromEntries(tables.map((t) => [t.shard, t.version]));
}

/** Creates or replaces a ShardingConfig; a 409 (the agent wrote its status meanwhile) reads it again and retries. */
export async function apply(kc: KubeConfig, obj: KubernetesObject & { spec: unknown }): Promise<void> {
  for (;;) {
    try {
      return await replaceOrCreate(kc, obj);
    } catch (err) {
      if (!isApiStatus(err, 409)) throw err;
    }
  }
}

async function replaceOrCreate(kc: KubeConfig, obj: KubernetesObject & { spec: unknown }): Promise<void> {
  const api = kc.makeApiClient(CustomObjectsApi);
  const namespace = obj.metadata?.namespace as string;
  const name = obj.metadata?.name as string;
  const params = { group: GROUP, version: 'v1alpha1', namespace, plural: 'shardingconfigs' };
  try {
    const existing = (await api.getNamespacedCustomObject({ ...params, name })) as KubernetesObject;
    await api.replaceNamespacedCustomObject({ ...params, name, body: { ...obj, metadata: { ...obj.metadata, resourceVersion: existing.metadata?.resourceVersion } } });
  } catch (err) {
    if (!isApiStatus(err, 404)) throw err;
    await api.createNamespacedCustomObject({ ...params, body: obj });
  }
}

export async function routeTables(nc: NatsConnection, operator: string): Promise<RouteTable[]> {
  const kv = await new Kvm(nc).open(Buckets.routes);
  const tables: RouteTable[] = [];
  for await (const key of await kv.keys(Keys.routesOf(operator))) {
    const entry = await kv.get(key);
    if (entry?.operation !== 'PUT') continue;
    const opened = openRouteTable(entry.value);
    if (!opened.ok) throw new Error(`route table ${key}: ${opened.reason}`);
    tables.push(opened.value);
  }
  return tables;
}

/**
 * As each shard's proxy does once it is up: acknowledges the shard's published table (waiting for it), so the hub
 * moves units to it (a move starts only towards a shard that serves: src/hub/handover.ts).
 */
export async function serveShards(nats: NatsEndpoint, nc: NatsConnection, operator: string, ...shards: string[]): Promise<void> {
  for (const shard of shards) {
    const table = await eventually(async () => {
      const found = (await routeTables(nc, operator)).find((t) => t.shard === shard);
      if (!found) throw new Error(`no route table of ${shard} yet`);
      return found;
    });
    const proxy = await connectNats({ config: await proxyNatsConfig(nats, operator, shard), name: `test-proxy-${shard}`, logger });
    acknowledge({ link: proxy, operator, shard, version: table.version, from: 'test-proxy' });
    await proxy.nc.flush();
    await proxy.close();
  }
}
