import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect, headers, type NatsConnection } from '@nats-io/transport-node';
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
  FEEDS_PER_REQUESTER,
  Subjects,
  encodeMessage,
  inboxPrefixFor,
  natsConnectionOptions,
  replyInboxKey,
  routeSigner,
  type Ack,
  type ClusterReport,
  watchRouteTable,
  watchRouteTables,
  watchStoredAcks,
  type Heartbeat,
  type NatsLink,
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
/** A raw connection as the transport functions take it (they use only `nc` and the connection events). */
const linkOf = (nc: NatsConnection): NatsLink => ({ nc, js: jetstream(nc), state: () => 'connected', onEvent: () => () => undefined, close: () => nc.close() });
const encode = (value: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(value));
/** A pull consumer the hub makes on each bucket, for the pulls aimed elsewhere. */
const PULL = 'attack-pull';
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

  /** Whether a hub opened the feed `nc` asked for on `subject`: judged by what the hub sees answered on the feed. */
  const feedOpened = async (nc: NatsConnection, subject: string, feed: string): Promise<'done' | 'refused'> => {
    const id = `feed${Date.now()}`;
    const answers: boolean[] = [];
    const sub = observer.subscribe(Subjects.feed(subject, id), {
      callback: (_err, msg) => {
        if (!msg.reply && msg.headers?.code !== 100) answers.push((JSON.parse(msg.string()) as { ok?: unknown }).ok === true);
      },
    });
    await observer.flush();
    nc.publish(subject, encode({ schema: MESSAGE_SCHEMA_VERSION, feed, id }));
    await nc.flush().catch(() => undefined);
    await pause(1_000);
    sub.unsubscribe();
    return answers.includes(true) ? 'done' : 'refused';
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

  it("an agent identity follows the hub's stored acknowledgements and the tables through its feeds, and reads KV no other way", async () => {
    const agent = await as({ role: 'agent', cluster: a });
    const link = linkOf(agent);
    // The positive control: the proxy's stored acknowledgement and its table, by the one way an agent reads them (the
    // feeds a hub opens for it).
    const acks: string[] = [];
    const tables: string[] = [];
    const watches = [
      watchStoredAcks({ link, cluster: a, logger: silent, onAck: (key) => acks.push(key) }),
      watchRouteTables({ link, cluster: a, logger: silent, onTable: (t) => tables.push(`${t.operator}.${t.shard}`) }),
    ];
    try {
      await eventually(() => expect(acks).toContain(Keys.ack(operator, shard)));
      await eventually(() => expect(tables).toContain(`${operator}.${shard}`));
    } finally {
      for (const w of watches) w.stop();
    }
    const state = await new Kvm(agent).open(Buckets.state);
    const watchOf = (key: string) => async (): Promise<void> => {
      const watch = await state.watch({ key });
      for await (const _ of watch) return;
    };
    const reads = {
      acks: await attempt(watchOf(Keys.ackAll)),
      reports: await attempt(watchOf(Keys.reportAll)),
      everything: await attempt(watchOf('>')),
      get: await attempt(() => state.get(Keys.ack(operator, shard))),
      put: await attempt(() => state.put(Keys.ack(operator, shard), encode({ schema: 1 }))),
      ownFeed: await feedOpened(agent, Subjects.watchCluster(a), 'acks'),
      otherFeed: await feedOpened(agent, Subjects.watchCluster(b), 'acks'),
      shardFeed: await feedOpened(agent, Subjects.watchShard(operator, shard), 'routes'),
    };
    expect(reads).toEqual({ acks: 'refused', reports: 'refused', everything: 'refused', get: 'refused', put: 'refused', ownFeed: 'done', otherFeed: 'refused', shardFeed: 'refused' });
  });

  it("a proxy identity reads only its own route table and acknowledges only for its own shard", async () => {
    const other = `${a}/someone-else`;
    const mine = await as({ role: 'proxy', operator, shard });
    // Its own table, by the one way a proxy reads it: the feed a hub opens for its shard.
    const seen: number[] = [];
    const watch = watchRouteTable({ link: linkOf(mine), operator, shard, logger: silent, trusted: [routeSignerKey(nats.nats)], onTable: (t) => seen.push(t.version) });
    try {
      await eventually(() => expect(seen).toContain(applied()));
    } finally {
      watch.stop();
    }
    const routes = await new Kvm(mine).open(Buckets.routes);
    const reads = {
      ownKey: await attempt(async () => {
        const own = await routes.watch({ key: Keys.route(operator, shard) });
        for await (const _ of own) return;
      }),
      otherKey: await attempt(() => routes.get(Keys.route(operator, other))),
      watchAll: await attempt(async () => {
        const all = await routes.watch({ key: '>' });
        for await (const _ of all) return;
      }),
      otherBucket: await attempt(async () => (await new Kvm(mine).open(Buckets.clusters)).get(Keys.cluster(a))),
      register: await attempt(() => mine.request(Subjects.register, encode({ schema: 1 }), { timeout: 1_000 })),
      ownFeed: await feedOpened(mine, Subjects.watchShard(operator, shard), 'routes'),
      otherShardFeed: await feedOpened(mine, Subjects.watchShard(operator, other), 'routes'),
      clusterFeed: await feedOpened(mine, Subjects.watchCluster(a), 'routes'),
      // Its own subject, but the acknowledgements' feed: not a proxy's.
      acksFeed: await feedOpened(mine, Subjects.watchShard(operator, shard), 'acks'),
    };
    expect(reads).toEqual({ ownKey: 'refused', otherKey: 'refused', watchAll: 'refused', otherBucket: 'refused', register: 'refused', ownFeed: 'done', otherShardFeed: 'refused', clusterFeed: 'refused', acksFeed: 'refused' });
    const ack = (s: string): Ack => ({ schema: MESSAGE_SCHEMA_VERSION, operator, shard: s, version: 424242, ackedAt: new Date().toISOString() });
    mine.publish(Subjects.ack(operator, other), encodeMessage(Messages.ack, ack(other)));
    await mine.flush().catch(() => undefined);
    await pause(1_000);
    expect(await (await new Kvm(observer).open(Buckets.state)).get(Keys.ack(operator, other))).toBeNull();
  });

  it('a compare-and-set the bucket refuses never reaches the proxy, though signed by the hub and newer', async () => {
    const table = await genuine();
    const routes = await new Kvm(observer).open(Buckets.routes);
    const key = Keys.route(operator, shard);
    const current = await routes.get(key);
    if (!current) throw new Error('no stored table');
    const trusted = routeSigner(readFileSync(security(nats.nats).auth.routeSigningSeed, 'utf8'));
    // A deposed leader's write: signed, newer, at a revision that is no longer the key's. A core subscriber on the
    // key's subject would see it; the feed delivers only what the stream stored.
    const stale = trusted.seal(RouteTableKind, { ...table, version: table.version + 1_000 });
    expect(await attempt(() => routes.update(key, stale, current.revision - 1))).toBe('refused');
    await pause(1_500);
    expect(applied()).toBe(table.version);
  });

  /**
   * Subjects neither the agent of a nor the proxy of atk's shard may publish on (nor the bootstrap, but for the
   * registration subject), and that carry nothing else while the test runs: a cluster and a shard nobody runs, keys
   * nobody writes, the hub's own inbox, feeds nobody opened.
   */
  const forbidden = (): string[] => [
    Subjects.report('victim'),
    Subjects.heartbeat('victim'),
    Subjects.register,
    Subjects.registerAs('victim'),
    Subjects.renew(operator, `${a}/victim`),
    Subjects.ack(operator, `${a}/victim`),
    `${inboxPrefixFor({ kind: 'creds', file: security(nats.nats).auth.hubCreds })}.attack.x`,
    `$KV.${Buckets.hub}.${Keys.leader}`,
    `$KV.${Buckets.hub}.victim`,
    `$KV.${Buckets.clusters}.${Keys.cluster('victim')}`,
    `$KV.${Buckets.state}.${Keys.report('victim')}`,
    `$KV.${Buckets.routes}.${Keys.route(operator, `${a}/victim`)}`,
    'ctrlmesh.feed.shard.victim.victim.x',
    'ctrlmesh.feed.cluster.victim.x',
  ];
  /** A key each bucket holds, and the one the role's watch names (its allowed consumer filter in earlier versions). */
  const held = (): Record<string, { known: string; watched: string }> => ({
    [Buckets.routes]: { known: Keys.route(operator, shard), watched: Keys.route(operator, shard) },
    [Buckets.state]: { known: Keys.ack(operator, shard), watched: Keys.ackAll },
    [Buckets.clusters]: { known: Keys.cluster(a), watched: '>' },
    [Buckets.hub]: { known: Keys.leader, watched: '>' },
  });
  /**
   * Every JetStream API request that names where the server delivers, aimed at `target`: push consumers (every
   * create subject, with and without a filter, durable or not) delivering there, pulls, gets and infos answered
   * there. The request's own reply is the target too.
   */
  const jetStreamAimedAt = (target: string, n: number): { subject: string; body: unknown }[] => {
    const out: { subject: string; body: unknown }[] = [];
    for (const [bucket, keys] of Object.entries(held())) {
      const stream = `KV_${bucket}`;
      const api = `$JS.API`;
      const name = `atk${n}x${out.length}`;
      const push = (extra: Record<string, unknown>): Record<string, unknown> => ({
        deliver_subject: target,
        ack_policy: 'none',
        deliver_policy: 'all',
        inactive_threshold: 10_000_000_000,
        mem_storage: true,
        num_replicas: 1,
        ...extra,
      });
      for (const filter of [`$KV.${bucket}.${keys.watched}`, `$KV.${bucket}.${keys.known}`, `$KV.${bucket}.>`]) {
        out.push({ subject: `${api}.CONSUMER.CREATE.${stream}.${name}f${out.length}.${filter}`, body: { stream_name: stream, config: push({ name: `${name}f${out.length}`, filter_subject: filter }) } });
      }
      out.push(
        { subject: `${api}.CONSUMER.CREATE.${stream}.${name}n`, body: { stream_name: stream, config: push({ name: `${name}n` }) } },
        { subject: `${api}.CONSUMER.CREATE.${stream}`, body: { stream_name: stream, config: push({}) } },
        { subject: `${api}.CONSUMER.DURABLE.CREATE.${stream}.${name}d`, body: { stream_name: stream, config: push({ durable_name: `${name}d` }) } },
        { subject: `${api}.DIRECT.GET.${stream}`, body: { last_by_subj: `$KV.${bucket}.${keys.known}` } },
        { subject: `${api}.DIRECT.GET.${stream}.$KV.${bucket}.${keys.known}`, body: '' },
        { subject: `${api}.STREAM.INFO.${stream}`, body: '' },
        { subject: `${api}.STREAM.INFO.${stream}`, body: { subjects_filter: '>' } },
        { subject: `${api}.STREAM.MSG.GET.${stream}`, body: { last_by_subj: `$KV.${bucket}.${keys.known}` } },
        { subject: `${api}.CONSUMER.MSG.NEXT.${stream}.${PULL}`, body: { batch: 5, expires: 1_000_000_000 } },
        { subject: `${api}.CONSUMER.INFO.${stream}.${PULL}`, body: '' },
        { subject: `${api}.CONSUMER.NAMES.${stream}`, body: {} },
        { subject: `${api}.CONSUMER.LIST.${stream}`, body: {} },
        { subject: `${api}.DIRECT.GET.${stream}`, body: { multi_last: [`$KV.${bucket}.>`], batch: 10 } },
        // A snapshot streams the store to a deliver subject of the request's choosing.
        { subject: `${api}.STREAM.SNAPSHOT.${stream}`, body: { deliver_subject: target, chunk_size: 1024 } },
        // Writes: a stream that captured the bus, a purge, a deletion; refused, so their answers go nowhere either.
        { subject: `${api}.STREAM.UPDATE.${stream}`, body: { name: stream, subjects: [`$KV.${bucket}.>`, `atk${n}.>`] } },
        { subject: `${api}.STREAM.PURGE.${stream}`, body: {} },
        { subject: `${api}.STREAM.MSG.DELETE.${stream}`, body: { seq: 1 } },
        { subject: `${api}.CONSUMER.DELETE.${stream}.${PULL}`, body: '' },
        { subject: `${api}.CONSUMER.PAUSE.${stream}.${PULL}`, body: { pause_until: '2100-01-01T00:00:00Z' } },
        { subject: `${api}.STREAM.LEADER.STEPDOWN.${stream}`, body: '' },
      );
    }
    out.push(
      { subject: '$JS.API.INFO', body: '' },
      { subject: '$JS.API.STREAM.NAMES', body: {} },
      { subject: '$JS.API.STREAM.LIST', body: {} },
      { subject: `$JS.API.STREAM.CREATE.ATK${n}`, body: { name: `ATK${n}`, subjects: [`atk${n}.>`], storage: 'memory' } },
      { subject: `$JS.FC.KV_${Buckets.routes}.x.1`, body: '' },
      { subject: `$JS.ACK.KV_${Buckets.routes}.${PULL}.1.1.1.1.0`, body: '' },
    );
    return out;
  };
  /** The requests the role may make (to the hub), each well formed: their reply subjects are the hub's to judge. */
  const ownRequests = (role: Role): { subject: string; body: unknown }[] => {
    const feed = (f: string): unknown => ({ schema: MESSAGE_SCHEMA_VERSION, feed: f, id: 'abcdefgh12' });
    if (role.role === 'agent') {
      return [
        { subject: Subjects.registerAs(a), body: { schema: 1, cluster: { name: a, labels: { testbed: cluster(0).name }, server: cluster(0).server, caPem: cluster(0).caPem } } },
        { subject: Subjects.watchCluster(a), body: feed('routes') },
        { subject: Subjects.watchCluster(a), body: feed('acks') },
        { subject: Subjects.heartbeat(a), body: '' },
      ];
    }
    if (role.role === 'bootstrap') {
      // A token of no cluster: the one of cluster a would bind a new key and refuse its agent's renewals.
      return [{ subject: Subjects.register, body: { schema: 1, token: 'no-such-token', cluster: { name: a, labels: {}, server: cluster(0).server, caPem: cluster(0).caPem } } }];
    }
    if (role.role !== 'proxy') return [];
    return [
      { subject: Subjects.renew(operator, shard), body: { schema: 1, operator, shard, acknowledged: applied(), nonce: 'abcdefgh12' } },
      { subject: Subjects.watchShard(operator, shard), body: feed('routes') },
      { subject: Subjects.ack(operator, shard), body: '' },
    ];
  };
  /** A subject the role may publish on. */
  const ownSubject = (role: Role): string => {
    if (role.role === 'agent') return Subjects.heartbeat(a);
    if (role.role === 'proxy') return Subjects.ack(operator, shard);
    return Subjects.register;
  };
  /** What the hub's leader lease looks like (the hub renews it every two seconds). */
  const isLease = (data: Uint8Array): boolean => {
    try {
      const value = JSON.parse(new TextDecoder().decode(data)) as Record<string, unknown>;
      return Object.keys(value).sort().join() === 'holder,renewedAt' && value.holder === 'hub-attacked';
    } catch {
      return false;
    }
  };

  it("no request of an agent, a proxy or the bootstrap (JetStream API or the hub's) has anything delivered or answered where that identity may not publish", async () => {
    const identities: Record<string, Role> = { agent: { role: 'agent', cluster: a }, proxy: { role: 'proxy', operator, shard }, bootstrap: { role: 'bootstrap' } };
    const targets = forbidden();
    // The hub's view: every message that reaches a target subject while the requests are made and a moment after.
    const seen: string[] = [];
    for (const target of targets) {
      observer.subscribe(target, {
        callback: (_err, msg) => {
          if (target === `$KV.${Buckets.hub}.${Keys.leader}` && isLease(msg.data)) return;
          // The bootstrap's own registration requests (it may publish there), each naming a target as its reply.
          if (msg.reply !== undefined && targets.includes(msg.reply)) return;
          seen.push(`${target}: ${msg.string().slice(0, 120)}`);
        },
      });
    }
    // A pull consumer on each bucket, made by the hub, for the pulls aimed at the targets.
    const jsm = await jetstreamManager(observer);
    for (const bucket of Object.values(Buckets)) {
      await jsm.consumers.add(`KV_${bucket}`, { durable_name: PULL, ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All, inactive_threshold: 60_000_000_000 });
    }
    await observer.flush();
    const routesBefore = await genuine();
    let n = 0;
    for (const [who, role] of Object.entries(identities)) {
      const nc = await as(role);
      // The bootstrap may publish on the registration subject itself.
      for (const target of targets.filter((t) => role.role !== 'bootstrap' || t !== Subjects.register)) {
        // The hub answers its own requests on any inbox (an inbox's owner drops what it did not ask for): aimed
        // elsewhere, they must get no answer.
        const hubRequests = replyInboxKey(target) === undefined ? ownRequests(role) : [];
        for (const request of [...jetStreamAimedAt(target, n++), ...hubRequests]) {
          const body = typeof request.body === 'string' ? request.body : JSON.stringify(request.body);
          nc.publish(request.subject, body, { reply: target });
        }
        // Message tracing: the server publishes a trace of the message on the subject its header names.
        const trace = headers();
        trace.set('Nats-Trace-Dest', target);
        trace.set('Nats-Trace-Only', 'true');
        nc.publish(ownSubject(role), '', { headers: trace });
      }
      await nc.flush().catch(() => undefined);
      expect(nc.isClosed(), who).toBe(false);
    }
    await pause(2_000);
    expect(seen).toEqual([]);
    // By effect on the store: no key written, the lease still the hub's, no consumer delivering to a target, no stream.
    for (const target of targets.filter((t) => t.startsWith('$KV.'))) {
      const [, bucket, ...key] = target.split('.');
      const entry = await (await new Kvm(observer).open(bucket ?? '')).get(key.join('.'));
      if (key.join('.') === Keys.leader) expect(entry && isLease(entry.value), target).toBe(true);
      else expect(entry, target).toBeNull();
    }
    for (const bucket of Object.values(Buckets)) {
      for await (const info of jsm.consumers.list(`KV_${bucket}`)) expect(targets, `${bucket}/${info.name}`).not.toContain(info.config.deliver_subject);
    }
    const streams: string[] = [];
    for await (const name of jsm.streams.names()) streams.push(name);
    expect(streams.sort()).toEqual(Object.values(Buckets).map((b) => `KV_${b}`).sort());
    for (const bucket of Object.values(Buckets)) {
      const info = await jsm.streams.info(`KV_${bucket}`);
      expect(info.config.subjects, bucket).toEqual([`$KV.${bucket}.>`]);
      expect((await jsm.consumers.info(`KV_${bucket}`, PULL)).config.durable_name).toBe(PULL);
    }
    expect(hub.isLeader()).toBe(true);
    expect((await genuine()).version).toBe(routesBefore.version);
    expect(applied()).toBe(routesBefore.version);
  });

  it('a proxy identity asking for feeds without end has the server hold a bounded number of consumers', async () => {
    const flood = `${a}/flood`;
    const nc = await as({ role: 'proxy', operator, shard: flood });
    const watch = Subjects.watchShard(operator, flood);
    const opened: string[] = [];
    const sub = observer.subscribe(Subjects.feedsOf(watch), {
      callback: (_err, msg) => {
        if (!msg.reply && msg.headers?.code !== 100 && (JSON.parse(msg.string()) as { ok?: unknown }).ok === true) opened.push(msg.subject);
      },
    });
    await observer.flush();
    const asked = FEEDS_PER_REQUESTER + 8;
    for (let i = 0; i < asked; i++) nc.publish(watch, encode({ schema: MESSAGE_SCHEMA_VERSION, feed: 'routes', id: `flood${i}x${Date.now()}` }));
    await nc.flush();
    await eventually(() => expect(opened).toHaveLength(asked), 10_000);
    sub.unsubscribe();
    const held = async (): Promise<number> => {
      let count = 0;
      for await (const info of (await jetstreamManager(observer)).consumers.list(`KV_${Buckets.routes}`)) {
        if (info.config.deliver_subject?.startsWith(Subjects.feedsOf(watch).slice(0, -1))) count += 1;
      }
      return count;
    };
    await eventually(async () => expect(await held()).toBe(FEEDS_PER_REQUESTER), 5_000);
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
