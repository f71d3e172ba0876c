import { CustomObjectsApi, type KubernetesObject } from '@kubernetes/client-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentHandle } from '../../src/agent/index.js';
import type { ClusterHealth, HubHandle } from '../../src/hub/index.js';
import { Kvm } from '@nats-io/kv';
import {
  Buckets,
  Keys,
  MESSAGE_SCHEMA_VERSION,
  Messages,
  Subjects,
  acknowledge,
  connectNats,
  encodeMessage,
  watchRouteTable,
  type Ack,
  type NatsLink,
  type RouteTable,
  type Watch,
} from '../../src/transport/index.js';
import {
  apply,
  deleteShardingConfigs,
  bootstrapTokens,
  ensureNamespace,
  eventually,
  GROUP,
  handWrittenConfig,
  logger,
  observe,
  privateNats,
  proxyNatsConfig,
  rollRoot,
  routeSignerKey,
  routeTables,
  runAgent,
  runHub,
  serveShards,
  versions,
} from './control-fixture.js';
import { cluster, kubeConfigFor, uniqueName } from './helpers/testbed.js';

const HASH = 'ctrlmesh.kusionstack.io/sharding-hash';
const NS = 'operator-failover';
const rollRootOf = (size: number): KubernetesObject & { spec: unknown } => rollRoot(NS, size);

/** A hand-written config of this file's namespace. */
const handConfig = (name: string, buckets: string[], key = HASH): KubernetesObject & { spec: unknown } => handWrittenConfig(NS, name, buckets, key);



function buckets(tables: readonly RouteTable[], shard: string): number[] {
  return tables.find((t) => t.shard === shard)?.clusters.flatMap((c) => c.buckets) ?? [];
}

describe('failures: hub failover, agent loss, invalid configs, bad input, NATS restart', () => {
  const kc = kubeConfigFor(cluster(0));
  const name = uniqueName('fo-a');
  let nats: Awaited<ReturnType<typeof privateNats>>;
  const hubs: HubHandle[] = [];
  let agent: AgentHandle | undefined;
  let nc: NatsConnection;
  let link: NatsLink;
  let watch: Watch | undefined;
  const applied: RouteTable[] = [];
  const operator = `${NS}/h1`;
  const shard1 = (): string => `${name}/h1`;
  const leader = (): HubHandle => {
    const found = hubs.find((h) => h.isLeader());
    if (!found) throw new Error('no leader');
    return found;
  };

  beforeAll(async () => {
    nats = await privateNats();
    hubs.push(await runHub(nats.nats, 'hub-1', { tokens: bootstrapTokens(name) }));
    await eventually(() => expect(hubs[0]?.isLeader()).toBe(true));
    hubs.push(await runHub(nats.nats, 'hub-2', { tokens: bootstrapTokens(name) }));
    agent = await runAgent({ registryName: name, bed: cluster(0), nats: nats.nats, webhook: undefined });
    nc = await observe(nats.nats, { maxReconnectAttempts: -1, reconnectTimeWait: 200 });
    link = await connectNats({ config: await proxyNatsConfig(nats.nats, operator, shard1()), name: 'test-proxy', logger });
    // What a proxy does, for the whole file: follow its shard's table through the transport API.
    watch = watchRouteTable({ link, operator, shard: shard1(), logger, trusted: [routeSignerKey(nats.nats)], onTable: (t) => applied.push(t) });
    await ensureNamespace(kc, NS);
    await eventually(() => apply(kc, handConfig('h1', ['0', '1'])));
    await eventually(() => apply(kc, handConfig('h2', ['2'])));
  });

  afterAll(async () => {
    watch?.stop();
    await deleteShardingConfigs(kc, NS, 'h1', 'h2', 'roll');
    await link?.close();
    await nc?.close();
    await agent?.stop();
    await Promise.all(hubs.map((h) => h.stop()));
    await nats?.cleanup();
  });

  it('publishes hand-written shards, versions each change and records acknowledgements', async () => {
    await eventually(async () => {
      expect(buckets(await routeTables(nc, operator), shard1())).toEqual([0, 1]);
      expect(buckets(await routeTables(nc, `${NS}/h2`), `${name}/h2`)).toEqual([2]);
    });
    const before = (await routeTables(nc, operator))[0] as RouteTable;
    await apply(kc, handConfig('h1', ['0', '1', '3']));
    await eventually(async () => expect(buckets(await routeTables(nc, operator), shard1())).toEqual([0, 1, 3]));
    // Versions come from the hub's clock (ms): above the previous one, never below the time of publishing.
    const after = (await routeTables(nc, operator))[0] as RouteTable;
    expect(after.version).toBeGreaterThan(before.version);
    expect(after.version).toBeGreaterThanOrEqual(Date.parse(after.issuedAt));
    // An ack above what was published proves nothing: ignored. The genuine one is recorded.
    acknowledge({ link, operator, shard: shard1(), version: after.version + 1, from: 'test-proxy' });
    acknowledge({ link, operator, shard: shard1(), version: after.version, from: 'test-proxy' });
    await eventually(() => {
      const s = leader().status().operators.find((o) => o.operator === operator)?.shards[0];
      expect(s?.acknowledgedVersion).toBe(after.version);
    });
  });

  it('hands units over between shards: revoke, then grant after the ack or after the lease, never both at once', async () => {
    const op = `${NS}/roll`;
    const s = (i: number): string => `${name}/roll-${i}-normal`;
    await apply(kc, rollRootOf(2));
    await eventually(async () => {
      const t = await routeTables(nc, op);
      expect(buckets(t, s(1))).toHaveLength(16);
      expect(buckets(t, s(2))).toHaveLength(16);
    });
    // Every shard's proxy is up (it acknowledged a table once), so units may move to it; none acknowledges a revocation.
    await serveShards(nats.nats, nc, op, s(1), s(2));
    await apply(kc, rollRootOf(4));
    await serveShards(nats.nats, nc, op, s(3), s(4));
    // Revoked from shard 1 (8-15 go to shard 2) and from shard 2 (16-23 go to shard 3): nobody owns them yet.
    const revoked = await eventually(async () => {
      const t = await routeTables(nc, op);
      expect(buckets(t, s(1))).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      expect(leader().status().operators.find((o) => o.operator === op)?.pending.length).toBeGreaterThan(0);
      return t;
    });
    expect(buckets(revoked, s(2)).filter((b) => b < 16)).toEqual([]);
    // Shard 1's proxy applies the table that revoked 8-15 and says so; shard 2 stays silent.
    const v1 = revoked.find((t) => t.shard === s(1))?.version as number;
    // As shard 1's proxy, whose identity may acknowledge for shard 1 alone.
    const proxy1 = await connectNats({ config: await proxyNatsConfig(nats.nats, op, s(1)), name: 'test-proxy-roll-1', logger });
    acknowledge({ link: proxy1, operator: op, shard: s(1), version: v1, from: 'test-proxy' });
    await proxy1.nc.flush();
    await proxy1.close();
    await eventually(async () => {
      const t = await routeTables(nc, op);
      expect(buckets(t, s(2))).toEqual([8, 9, 10, 11, 12, 13, 14, 15]);
      expect(buckets(t, s(3))).toEqual([16, 17, 18, 19, 20, 21, 22, 23]);
      expect(buckets(t, s(4))).toEqual([24, 25, 26, 27, 28, 29, 30, 31]);
    }, 20_000);
    const history = leader().status().operators.find((o) => o.operator === op)?.history ?? [];
    const moved = history.filter((h) => h.to !== null && h.from !== h.to);
    expect(moved.length).toBeGreaterThanOrEqual(24);
    for (const h of moved) {
      expect(h.grantedAt).toBeGreaterThanOrEqual(h.revokedAt);
      if (h.from === s(1)) {
        expect(h.grantedBy).toBe('ack');
        expect(h.acknowledgedAt).toBeGreaterThanOrEqual(h.revokedAt);
        expect(h.grantedAt).toBeGreaterThanOrEqual(h.acknowledgedAt as number);
      } else {
        // No ack from shard 2: its units waited for its proxies' lease (3 s) to run out.
        expect(h.grantedBy).toBe('lease-expiry');
        expect((h.grantedAt as number) - h.revokedAt).toBeGreaterThanOrEqual(3_000);
      }
    }
    logger.info({ moved: moved.length }, 'handover timeline checked');
  });

  it('a ShardingConfig with a bad field gets an Invalid condition naming it, and the previous route table stays', async () => {
    const before = await routeTables(nc, operator);
    // The CRD's schema cannot see this one (label key syntax), so only ControllerMesh's validation catches it.
    await apply(kc, handConfig('h1', ['0'], 'not a label key!'));
    await eventually(async () => {
      const obj = (await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
        group: GROUP,
        version: 'v1alpha1',
        namespace: NS,
        plural: 'shardingconfigs',
        name: 'h1',
      })) as { status?: { conditions?: { type: string; status: string; message: string }[] } };
      const invalid = obj.status?.conditions?.find((c) => c.type === 'Invalid');
      expect(invalid?.status).toBe('True');
      expect(invalid?.message).toContain('spec.limits[0].selector.matchExpressions[0].key');
      expect(obj.status?.conditions?.find((c) => c.type === 'Accepted')?.status).toBe('False');
    });
    // Give the hub time to (wrongly) react, then check nothing moved.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await routeTables(nc, operator)).toEqual(before);
    await apply(kc, handConfig('h1', ['0', '1', '3']));
  });

  it('drops malformed messages and carries on', async () => {
    for (const subject of [Subjects.register, Subjects.heartbeat(name), Subjects.report(name), Subjects.ack(operator, shard1()), Subjects.heartbeat('ghost')]) {
      nc.publish(subject, new TextEncoder().encode('{"schema": 99, "garbage": true'));
      nc.publish(subject, new TextEncoder().encode(JSON.stringify({ schema: 1, cluster: name })));
    }
    await nc.flush();
    // A request with a malformed body gets no answer rather than crashing the hub.
    await expect(nc.request(Subjects.register, new TextEncoder().encode('not json'), { timeout: 500 })).rejects.toThrow();
    await apply(kc, handConfig('h1', ['0', '1', '4']));
    await eventually(async () => expect(buckets(await routeTables(nc, operator), shard1())).toEqual([0, 1, 4]));
    expect(leader().status().clusters.find((c) => c.name === name)?.health).toBe('Ready');
  });

  it('killing the hub leader: the standby takes over and the route tables keep their versions', async () => {
    const old = leader();
    const before = versions(await routeTables(nc, operator));
    await old.stop({ releaseLease: false });
    hubs.splice(hubs.indexOf(old), 1);
    await eventually(() => expect(hubs[0]?.isLeader()).toBe(true), 20_000);
    // Nothing changed, so the new leader publishes nothing new.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(versions(await routeTables(nc, operator))).toEqual(before);
    // ... and it carries on from those versions.
    await apply(kc, handConfig('h1', ['0', '1', '5']));
    await eventually(async () => expect(buckets(await routeTables(nc, operator), shard1())).toEqual([0, 1, 5]));
    expect((await routeTables(nc, operator))[0]?.version).toBeGreaterThan(before[shard1()] ?? Infinity);
  });

  it('restarting all hubs keeps the registry and the acknowledgements', async () => {
    const registered = leader().status().clusters.find((c) => c.name === name);
    const acked = (hub: HubHandle): number | null | undefined =>
      hub.status().operators.find((o) => o.operator === operator)?.shards.find((s) => s.name === shard1())?.acknowledgedVersion;
    const before = acked(leader());
    expect(before).toBeGreaterThan(0);
    await Promise.all(hubs.map((h) => h.stop()));
    hubs.length = 0;
    hubs.push(await runHub(nats.nats, 'hub-3', { tokens: bootstrapTokens(name) }));
    const fresh = hubs[0] as HubHandle;
    await eventually(() => expect(fresh.status().clusters.find((c) => c.name === name)?.registeredAt).toBe(registered?.registeredAt));
    await eventually(() => expect(fresh.isLeader()).toBe(true));
    // No proxy acknowledged anything since: the fresh hub read it back from KV.
    expect(acked(fresh)).toBe(before);
  });

  it('a hub restarted in the middle of a handover grants on the stored acknowledgements, not the lease', async () => {
    const op = `${NS}/roll`;
    // Proxy leases far longer than the test: only acknowledgements can complete this handover.
    const patient = (identity: string): Promise<HubHandle> => runHub(nats.nats, identity, { tokens: bootstrapTokens(name), proxyLeaseSeconds: 600 });
    await Promise.all(hubs.map((h) => h.stop()));
    hubs.length = 0;
    let hub = await patient('hub-patient-1');
    await eventually(() => expect(hub.isLeader()).toBe(true));
    await apply(kc, rollRootOf(2)); // from 4 shards to 2: units of shards 2, 3 and 4 move
    const pending = await eventually(() => {
      const p = hub.status().operators.find((o) => o.operator === op)?.pending ?? [];
      expect(p.length).toBeGreaterThan(0);
      return p;
    });
    // The leader stores each ack, then dies before granting: play that crash with the acks written straight to KV.
    await hub.stop({ releaseLease: false });
    const state = await new Kvm(nc).open(Buckets.state);
    const revoking = new Map(pending.map((p) => [p.from, p.revokeVersion]));
    for (const [shard, version] of revoking) {
      const ack: Ack = { schema: MESSAGE_SCHEMA_VERSION, operator: op, shard, version, ackedAt: new Date().toISOString(), from: 'test-proxy' };
      await state.put(Keys.ack(op, shard), encodeMessage(Messages.ack, ack));
    }
    hub = await patient('hub-patient-2');
    await eventually(() => expect(hub.status().operators.find((o) => o.operator === op)?.pending).toEqual([]), 20_000);
    const granted = (hub.status().operators.find((o) => o.operator === op)?.history ?? []).filter((h) => revoking.has(h.from ?? '') && h.revokedAt >= Math.min(...pending.map((p) => p.revokedAt)));
    expect(granted.length).toBe(pending.length);
    for (const h of granted) expect(h.grantedBy).toBe('ack');
    await hub.stop();
    hubs.push(await runHub(nats.nats, 'hub-4', { tokens: bootstrapTokens(name) }));
    await eventually(() => expect(hubs[0]?.isLeader()).toBe(true), 20_000);
  });

  it('stopping the agent turns its cluster Unknown then Offline; restarting it turns it Ready', async () => {
    const hub = leader();
    const seen: { health: ClusterHealth; at: number }[] = [];
    const poll = setInterval(() => {
      const h = hub.status().clusters.find((c) => c.name === name)?.health;
      if (h && seen.at(-1)?.health !== h) seen.push({ health: h, at: Date.now() });
    }, 50);
    try {
      await eventually(() => expect(seen.at(-1)?.health).toBe('Ready'));
      // Counted from before the stop: a stop slowed by a loaded machine must not hide the Unknown step.
      const from = seen.length;
      await agent?.stop();
      agent = undefined;
      await eventually(() => expect(seen.at(-1)?.health).toBe('Offline'), 20_000);
      const lost = seen.slice(from);
      expect(lost.map((s) => s.health)).toEqual(['Unknown', 'Offline']);
      // Not before the configured thresholds (2 s and 5 s), counted from the last heartbeat the hub received; its
      // clock is the one the poll uses, so however late the last heartbeat or the stop was, this holds.
      const lastHeartbeat = Date.parse(hub.status().clusters.find((c) => c.name === name)?.lastHeartbeat ?? '');
      expect((lost[0]?.at ?? 0) - lastHeartbeat).toBeGreaterThanOrEqual(2_000);
      expect((lost[1]?.at ?? 0) - lastHeartbeat).toBeGreaterThanOrEqual(5_000);
      logger.info({ unknownAfterMs: (lost[0]?.at ?? 0) - lastHeartbeat, offlineAfterMs: (lost[1]?.at ?? 0) - lastHeartbeat }, 'health after the last heartbeat');
      agent = await runAgent({ registryName: name, bed: cluster(0), nats: nats.nats, webhook: undefined });
      // A restarting agent says "not in sync yet" (Unknown) until its informers have listed.
      await eventually(() => expect(seen.at(-1)?.health).toBe('Ready'));
    } finally {
      clearInterval(poll);
    }
  });

  it('a NATS restart: hub, agent and a route-table watcher reconnect and resynchronise', async () => {
    const hub = leader();
    await eventually(() => expect(applied.at(-1)?.clusters[0]?.buckets).toEqual([0, 1, 5]));
    await nats.nats.stop();
    await apply(kc, handConfig('h1', ['0', '1', '6'])); // changed while NATS is down
    await nats.nats.start();
    await eventually(async () => expect(buckets(await routeTables(nc, operator), shard1())).toEqual([0, 1, 6]), 30_000);
    await eventually(() => expect(hub.status().clusters.find((c) => c.name === name)?.health).toBe('Ready'), 30_000);
    await apply(kc, handConfig('h1', ['0', '1', '7']));
    await eventually(async () => expect(buckets(await routeTables(nc, operator), shard1())).toEqual([0, 1, 7]));
    await eventually(() => expect(applied.at(-1)?.clusters[0]?.buckets).toEqual([0, 1, 7]));
    // Through hub failover, restarts and the NATS restart it saw only newer versions, each once.
    const seen = applied.map((t) => t.version);
    expect(seen).toEqual([...new Set(seen)].sort((a, b) => a - b));
  });
});
