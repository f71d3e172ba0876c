import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { Kvm } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { createServer as createNkey } from '@nats-io/nkeys';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentHandle } from '../../src/agent/index.js';
import { natsClientConfig } from '../../src/dev/index.js';
import type { HubHandle } from '../../src/hub/index.js';
import { NatsRouteSource } from '../../src/proxy/index.js';
import {
  Buckets,
  Keys,
  MESSAGE_SCHEMA_VERSION,
  Messages,
  RouteTableKind,
  Subjects,
  encodeMessage,
  natsConnectionOptions,
  routeSigner,
  type Ack,
  type ClusterReport,
  type Heartbeat,
  type RegisterReply,
  type RouteTable,
} from '../../src/transport/index.js';
import type { Role } from '../../src/transport/auth/index.js';
import {
  apply,
  deleteShardingConfigs,
  ensureNamespace,
  eventually,
  handWrittenConfig,
  observe,
  privateNats,
  proxyNatsConfig,
  routeSignerKey,
  routeTables,
  runAgent,
  runHub,
  security,
} from './control-fixture.js';
import { silent, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { cluster, kubeConfigFor, testbed } from './helpers/testbed.js';

const NS = 'operator-attacks';
const HASH = 'ctrlmesh.kusionstack.io/sharding-hash';
const encode = (value: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(value));
const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Whether an attempt went through; the tests judge by effect, this only says what the client saw. */
async function attempt(action: () => Promise<unknown>): Promise<'done' | 'refused'> {
  try {
    await action();
    return 'done';
  } catch {
    return 'refused';
  }
}

describe('the control-plane bus tried as an attacker would (TLS + JWT auth, a real hub, agents and proxy)', () => {
  // Registered under the bed's names, so the proxy's credentials (a context per bed cluster) fit the tables.
  const a = cluster(0).name;
  const b = cluster(1).name;
  const tokens = [
    { cluster: a, token: 'token-of-a' },
    { cluster: b, token: 'token-of-b' },
  ];
  const operator = `${NS}/atk`;
  const shard = `${a}/atk`;
  let nats: Awaited<ReturnType<typeof privateNats>>;
  let hub: HubHandle;
  const agents: AgentHandle[] = [];
  let proxy: TestProxy;
  let observer: NatsConnection;
  const clients: NatsConnection[] = [];

  /** A raw client with an identity of the bed, as an attacker who stole that identity's creds would hold it. */
  const as = async (identity: Role): Promise<NatsConnection> => {
    const nc = await connect({ ...natsConnectionOptions(await natsClientConfig(nats.nats, identity)), maxReconnectAttempts: 0 });
    clients.push(nc);
    return nc;
  };
  const applied = (): number => proxy.proxy.controller.current?.table.version ?? -1;
  const acknowledged = (s = shard): number | null | undefined =>
    hub.status().operators.find((o) => o.operator === operator)?.shards.find((x) => x.name === s)?.acknowledgedVersion;
  const genuine = async (): Promise<RouteTable> => {
    const table = (await routeTables(observer, operator)).find((t) => t.shard === shard);
    if (!table) throw new Error('no route table yet');
    return table;
  };

  beforeAll(async () => {
    nats = await privateNats();
    // The operator file: atk is cluster a's alone; cluster b may define only its own operator.
    hub = await runHub(nats.nats, 'hub-attacked', { tokens, operators: [{ operator, clusters: [a] }, { operator: `${NS}/own`, clusters: [b] }] });
    await eventually(() => expect(hub.isLeader()).toBe(true));
    agents.push(await runAgent({ registryName: a, bed: cluster(0), nats: nats.nats, token: 'token-of-a', webhook: undefined }));
    agents.push(await runAgent({ registryName: b, bed: cluster(1), nats: nats.nats, token: 'token-of-b', webhook: undefined }));
    observer = await observe(nats.nats);
    const kc = kubeConfigFor(cluster(0));
    await ensureNamespace(kc, NS);
    await eventually(() => apply(kc, handWrittenConfig(NS, 'atk', ['0', '1'], HASH)));
    const table = await eventually(genuine, 30_000);
    const identity = await proxyNatsConfig(nats.nats, operator, shard);
    proxy = await startTestProxy({
      table: undefined,
      credentialsPath: testbed().kubeconfigPath,
      source: () => new NatsRouteSource({ nats: identity, trusted: [routeSignerKey(nats.nats)], operator, shard, from: 'atk-pod', logger: silent, reackMs: 500 }),
    });
    await eventually(() => expect(applied()).toBe(table.version));
    await eventually(() => expect(acknowledged()).toBe(table.version));
  }, 120_000);

  afterAll(async () => {
    await deleteShardingConfigs(kubeConfigFor(cluster(0)), NS, 'atk');
    await deleteShardingConfigs(kubeConfigFor(cluster(1)), NS, 'atk', 'own');
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await proxy?.close();
    await observer?.close();
    for (const agent of agents) await agent.stop();
    await hub?.stop();
    await nats?.cleanup();
  });

  it('refuses an anonymous client, with or without TLS', async () => {
    const { caFile } = security(nats.nats);
    await expect(connect({ servers: nats.nats.url, tls: { caFile }, maxReconnectAttempts: 0 })).rejects.toThrow(/authorization/i);
    await expect(connect({ servers: nats.nats.url.replace('tls://', 'nats://'), tls: null, maxReconnectAttempts: 0 })).rejects.toThrow();
    // A client that does not verify the server: no CA, so the server's certificate is refused.
    await expect(connect({ servers: nats.nats.url, tls: {}, maxReconnectAttempts: 0 })).rejects.toThrow();
  });

  it("an agent identity cannot speak for another cluster, acknowledge, or write the registry, route tables, state or the lease", async () => {
    const agent = await as({ role: 'agent', cluster: a });
    const forgedAt = '2001-01-01T00:00:00.000Z';
    const report: ClusterReport = {
      schema: MESSAGE_SCHEMA_VERSION,
      cluster: b,
      sentAt: forgedAt,
      hash: { algorithm: 'fnv', bucketCount: 32, labels: { hash: HASH, namespace: 'ctrlmesh.kusionstack.io/namespace', control: 'ctrlmesh.kusionstack.io/control' } },
      shardingConfigs: [],
      circuitBreakers: [],
      faultInjections: [],
      pods: [],
      namespaces: [],
      objectCounts: [],
    };
    const heartbeat: Heartbeat = { schema: MESSAGE_SCHEMA_VERSION, cluster: b, sentAt: forgedAt, apiServerReachable: false };
    const ack: Ack = { schema: MESSAGE_SCHEMA_VERSION, operator, shard, version: 1_000_000, ackedAt: forgedAt };
    for (let i = 0; i < 10; i++) {
      agent.publish(Subjects.report(b), encodeMessage(Messages.clusterReport, report));
      agent.publish(Subjects.heartbeat(b), encodeMessage(Messages.heartbeat, heartbeat));
      agent.publish(Subjects.ack(operator, shard), encodeMessage(Messages.ack, ack));
    }
    const kvm = new Kvm(agent);
    const writes = {
      registry: await attempt(async () => (await kvm.open(Buckets.clusters)).put(Keys.cluster('forged'), encode({ schema: 1 }))),
      routes: await attempt(async () => (await kvm.open(Buckets.routes)).put(Keys.route(operator, shard), encode({ schema: 1 }))),
      state: await attempt(async () => (await kvm.open(Buckets.state)).put(Keys.ack(operator, shard), encodeMessage(Messages.ack, ack))),
      lease: await attempt(async () => (await kvm.open(Buckets.hub)).put(Keys.leader, encode({ holder: 'attacker' }))),
      leaseDelete: await attempt(async () => (await kvm.open(Buckets.hub)).delete(Keys.leader)),
      registerAsB: await attempt(() =>
        agent.request(Subjects.registerAs(b), encodeMessage(Messages.registerRequest, { schema: 1, cluster: { name: b, labels: {}, server: 'https://203.0.113.1:6443', caPem: cluster(1).caPem } }), { timeout: 1_000 }),
      ),
    };
    expect(writes).toEqual({ registry: 'refused', routes: 'refused', state: 'refused', lease: 'refused', leaseDelete: 'refused', registerAsB: 'refused' });
    await pause(1_500);
    // By effect: nothing the hub holds changed.
    const state = await new Kvm(observer).open(Buckets.state);
    const storedReport = JSON.parse((await state.get(Keys.report(b)))?.string() ?? '{}') as Partial<ClusterReport>;
    expect(storedReport.sentAt).not.toBe(forgedAt);
    expect(hub.status().clusters.find((c) => c.name === b)).toMatchObject({ health: 'Ready', server: cluster(1).server });
    expect(acknowledged()).toBe(applied());
    expect(await (await new Kvm(observer).open(Buckets.clusters)).get(Keys.cluster('forged'))).toBeNull();
    expect(hub.isLeader()).toBe(true);
    // Its own cluster's subjects are open to it (the positive control).
    const own = await attempt(() => agent.request(Subjects.registerAs(a), encodeMessage(Messages.registerRequest, { schema: 1, cluster: { name: a, labels: { testbed: cluster(0).name }, server: cluster(0).server, caPem: cluster(0).caPem } }), { timeout: 3_000 }));
    expect(own).toBe('done');
  });

  it("an agent identity watches the hub's stored acknowledgements (for the rules' status) and reads nothing else of its state", async () => {
    const agent = await as({ role: 'agent', cluster: a });
    const state = await new Kvm(agent).open(Buckets.state);
    // The positive control: the proxy's stored acknowledgement, by the one way an agent reads it (a watch of ack.*.*).
    const acks = await state.watch({ key: Keys.ackAll });
    for await (const entry of acks) {
      expect(entry.key).toBe(Keys.ack(operator, shard));
      break;
    }
    const watchOf = (key: string) => async (): Promise<void> => {
      const watch = await state.watch({ key });
      for await (const _ of watch) return;
    };
    const reads = {
      reports: await attempt(watchOf(Keys.reportAll)),
      handovers: await attempt(watchOf(Keys.handoverAll)),
      everything: await attempt(watchOf('>')),
      get: await attempt(() => state.get(Keys.ack(operator, shard))),
      put: await attempt(() => state.put(Keys.ack(operator, shard), encode({ schema: 1 }))),
    };
    expect(reads).toEqual({ reports: 'refused', handovers: 'refused', everything: 'refused', get: 'refused', put: 'refused' });
  });

  it("a proxy identity reads only its own route table and acknowledges only for its own shard", async () => {
    const other = `${a}/someone-else`;
    const mine = await as({ role: 'proxy', operator, shard });
    const routes = await new Kvm(mine).open(Buckets.routes);
    // Its own table, by the one way a proxy reads it: a watch of its key (KV gets are not filtered by key).
    const own = await routes.watch({ key: Keys.route(operator, shard) });
    for await (const entry of own) {
      expect(entry.operation).toBe('PUT');
      break;
    }
    const reads = {
      otherKey: await attempt(() => routes.get(Keys.route(operator, other))),
      watchAll: await attempt(async () => {
        const watch = await routes.watch({ key: '>' });
        for await (const _ of watch) return;
      }),
      otherBucket: await attempt(async () => (await new Kvm(mine).open(Buckets.clusters)).get(Keys.cluster(a))),
      register: await attempt(() => mine.request(Subjects.register, encode({ schema: 1 }), { timeout: 1_000 })),
    };
    expect(reads).toEqual({ otherKey: 'refused', watchAll: 'refused', otherBucket: 'refused', register: 'refused' });
    const ack = (s: string): Ack => ({ schema: MESSAGE_SCHEMA_VERSION, operator, shard: s, version: 424242, ackedAt: new Date().toISOString() });
    mine.publish(Subjects.ack(operator, other), encodeMessage(Messages.ack, ack(other)));
    await mine.flush().catch(() => undefined);
    await pause(1_000);
    expect(await (await new Kvm(observer).open(Buckets.state)).get(Keys.ack(operator, other))).toBeNull();
  });

  it('the bootstrap identity can only ask to register: it cannot listen to registrations (and their tokens)', async () => {
    const bootstrap = await as({ role: 'bootstrap' });
    let error: Error | undefined;
    const onError = (err: Error | null): void => {
      if (err) error = err;
    };
    bootstrap.subscribe(Subjects.register, { callback: onError });
    bootstrap.subscribe('ctrlmesh.>', { callback: onError });
    await bootstrap.flush().catch(() => undefined);
    await eventually(() => expect(error?.message).toMatch(/permission/i), 5_000);
  });

  it("registration: another cluster's token, a new cluster without a token of its own and re-pointing by token are refused", async () => {
    const bootstrap = await as({ role: 'bootstrap' });
    const register = async (cluster: { name: string; server: string; caPem: string }, token: string): Promise<RegisterReply> => {
      const msg = await bootstrap.request(Subjects.register, encodeMessage(Messages.registerRequest, { schema: 1, token, cluster: { ...cluster, labels: {} } }), { timeout: 3_000 });
      return JSON.parse(new TextDecoder().decode(msg.data)) as RegisterReply;
    };
    // What a registration could change (heartbeats move lastHeartbeat on their own every 2 s).
    const identity = (): unknown => {
      const found = hub.status().clusters.find((c) => c.name === a);
      return found && { name: found.name, server: found.server, labels: found.labels, registeredAt: found.registeredAt };
    };
    const before = identity();
    const answers = {
      othersToken: await register({ name: a, server: cluster(0).server, caPem: cluster(0).caPem }, 'token-of-b'),
      newCluster: await register({ name: 'intruder', server: cluster(0).server, caPem: cluster(0).caPem }, 'token-of-a'),
      repoint: await register({ name: a, server: 'https://203.0.113.9:6443', caPem: cluster(1).caPem }, 'token-of-a'),
      plainHttp: await register({ name: a, server: 'http://203.0.113.9:8080', caPem: cluster(0).caPem }, 'token-of-a'),
    };
    for (const reply of Object.values(answers)) expect(reply).toMatchObject({ ok: false });
    expect(answers.repoint.error).toMatch(/cannot re-point/);
    expect(identity()).toEqual(before);
    expect(hub.status().clusters.map((c) => c.name)).not.toContain('intruder');
    const registry = await new Kvm(observer).open(Buckets.clusters);
    expect((await registry.get(Keys.cluster(a)))?.string()).not.toContain('token-of-a');
  });

  it('tables signed by another key, unsigned, naming http or jumping 2^53 are never applied nor stored, and never reach the named server', async () => {
    let dialled = 0;
    const attacker: Server = createServer((socket) => {
      dialled += 1;
      socket.destroy();
    });
    await new Promise<void>((r) => attacker.listen(0, '127.0.0.1', r));
    const port = (attacker.address() as { port: number }).port;
    try {
      const table = await genuine();
      const stored = async (): Promise<RouteTable> => (JSON.parse(await readFile(proxy.storePath, 'utf8')) as { table: RouteTable }).table;
      const hostile = (version: number, server = `https://127.0.0.1:${port}`): RouteTable => ({
        ...table,
        version,
        clusters: table.clusters.map((c) => ({ ...c, server, buckets: Array.from({ length: 32 }, (_, i) => i) })),
      });
      const routes = await new Kvm(observer).open(Buckets.routes);
      const key = Keys.route(operator, shard);
      const stranger = routeSigner(new TextDecoder().decode(createNkey().getSeed()));
      const trusted = routeSigner(readFileSync(security(nats.nats).auth.routeSigningSeed, 'utf8'));
      // Written with the hub's own creds: the signature is what stops these, not the bus.
      await routes.put(key, stranger.seal(RouteTableKind, hostile(table.version + 1)));
      await routes.put(key, encode(hostile(table.version + 2)));
      await routes.put(key, trusted.seal(RouteTableKind, hostile(Number.MAX_SAFE_INTEGER)));
      await routes.put(key, trusted.seal(RouteTableKind, hostile(table.version + 3, `http://127.0.0.1:${port}`)));
      await pause(1_500);
      // The hub's periodic pass may already have written a genuine table over them (above every forged version):
      // what the proxy applied and stored is that or the table before, never a forged one.
      const forged = [table.version + 1, table.version + 2, Number.MAX_SAFE_INTEGER, table.version + 3];
      const genuineServers = (t: RouteTable | undefined): boolean => t !== undefined && t.clusters.every((c, i) => c.server === table.clusters[i]?.server);
      for (const seen of [proxy.proxy.controller.current?.table, await stored()]) {
        expect(forged).not.toContain(seen?.version);
        expect(genuineServers(seen)).toBe(true);
      }
      const res = await fetch(`${proxy.proxy.apiUrl}/api/v1/namespaces/${NS}/configmaps`);
      expect(res.status).toBe(200);
      expect(dialled).toBe(0);
      // Not pinned: the hub's next genuine table (it overwrites the forged entries) is applied.
      await apply(kubeConfigFor(cluster(0)), handWrittenConfig(NS, 'atk', ['0', '1', '2'], HASH));
      await eventually(() => expect(proxy.proxy.controller.current?.table.clusters[0]?.buckets).toEqual([0, 1, 2]), 20_000);
      expect(applied()).toBeGreaterThan(table.version);
      expect(dialled).toBe(0);
    } finally {
      attacker.close();
    }
  });

  it("a member cluster that defines another's operator under its name joins nothing (the hub's operator file)", async () => {
    const before = await genuine();
    const kc = kubeConfigFor(cluster(1));
    await ensureNamespace(kc, NS);
    // Cluster b's API server holds a config named as a's operator, and one of its own: its real agent reports both.
    await eventually(() => apply(kc, handWrittenConfig(NS, 'atk', ['2', '3'], HASH)));
    await eventually(() => apply(kc, handWrittenConfig(NS, 'own', ['4'], HASH)));
    // The positive control: b's report reached the hub's plan.
    const own = await eventually(async () => {
      const table = (await routeTables(observer, `${NS}/own`)).find((t) => t.shard === `${b}/own`);
      if (!table) throw new Error('no table for b/own yet');
      return table;
    }, 30_000);
    expect(own.clusters.find((c) => c.name === b)?.buckets).toEqual([4]);
    await pause(1_000);
    // By effect: atk has no shard in b, and a's table (its clusters, buckets and version) is as it was.
    const tables = await routeTables(observer, operator);
    expect(tables.map((t) => t.shard)).toEqual([shard]);
    expect(tables[0]?.version).toBe(before.version);
    expect(tables[0]?.clusters).toEqual(before.clusters);
    expect(applied()).toBe(before.version);
  });
});
