import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { Value } from '@sinclair/typebox/value';
import { pino, type Logger } from 'pino';
import { AGENT_DEFAULTS, startAgent, type AgentHandle, type AgentOptions } from '../../src/agent/index.js';
import { startNats, type ClusterInfo, type NatsHandle } from '../../src/dev/index.js';
import { HUB_DEFAULTS, startHub, type HubHandle, type HubOptions } from '../../src/hub/index.js';
import { Buckets, Keys, RouteTableSchema, type RouteTable } from '../../src/transport/index.js';
import { kubeConfigFor } from './helpers/testbed.js';

export const GROUP = 'ctrlmesh.kusionstack.io';

/** Test logs are silent unless CTRLMESH_TEST_LOG names a level (e.g. debug). */
export const logger: Logger = pino({ level: process.env.CTRLMESH_TEST_LOG ?? 'silent' });

export const TOKEN = 'test-bootstrap-token';

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
export function hubOptions(nats: string, identity: string, overrides: Partial<HubOptions> = {}): HubOptions {
  return {
    ...HUB_DEFAULTS,
    nats,
    tokens: [TOKEN],
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

export function agentOptions(options: { registryName: string; bed: ClusterInfo; nats: string } & Partial<Omit<AgentOptions, 'cluster'>>): AgentOptions {
  const { registryName, bed, nats, ...overrides } = options;
  return {
    ...AGENT_DEFAULTS,
    cluster: registryName,
    clusterLabels: { testbed: bed.name },
    kc: kubeConfigFor(bed),
    nats,
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

export async function runHub(nats: string, identity: string, overrides: Partial<HubOptions> = {}): Promise<HubHandle> {
  return startHub(hubOptions(nats, identity, overrides), { logger: logger.child({ hub: identity }) });
}

export async function runAgent(options: Parameters<typeof agentOptions>[0]): Promise<AgentHandle> {
  return startAgent(agentOptions(options), { logger: logger.child({ agent: options.registryName }) });
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

export async function ensureNamespace(kc: KubeConfig, name: string): Promise<void> {
  try {
    await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
  } catch (err) {
    if ((err as { code?: number }).code !== 409) throw err;
  }
}

/** Creates or replaces a ShardingConfig; a 409 (the agent wrote its status meanwhile) reads it again and retries. */
export async function apply(kc: KubeConfig, obj: KubernetesObject & { spec: unknown }): Promise<void> {
  for (;;) {
    try {
      return await replaceOrCreate(kc, obj);
    } catch (err) {
      if ((err as { code?: number }).code !== 409) throw err;
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
    if ((err as { code?: number }).code !== 404) throw err;
    await api.createNamespacedCustomObject({ ...params, body: obj });
  }
}

export async function routeTables(nc: NatsConnection, operator: string): Promise<RouteTable[]> {
  const kv = await new Kvm(nc).open(Buckets.routes);
  const tables: RouteTable[] = [];
  for await (const key of await kv.keys(Keys.routesOf(operator))) {
    const entry = await kv.get(key);
    if (entry?.operation === 'PUT') tables.push(Value.Parse(RouteTableSchema, entry.json()));
  }
  return tables;
}

