import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubernetesObject } from '@kubernetes/client-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentHandle } from '../../src/agent/index.js';
import type { HubHandle } from '../../src/hub/index.js';
import { NatsRouteSource, parseStoredTable } from '../../src/proxy/index.js';
import { Buckets, Keys, MESSAGE_SCHEMA_VERSION, Messages, decodeMessage, encodeMessage, type Ack, type RouteTable } from '../../src/transport/index.js';
import {
  apply,
  deleteShardingConfigs,
  bootstrapTokens,
  ensureNamespace,
  eventually,
  handWrittenConfig,
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
import { silent, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { cluster, kubeConfigFor, testbed } from './helpers/testbed.js';

const NS = 'operator-recovery';
const rollRootOf = (size: number): KubernetesObject & { spec: unknown } => rollRoot(NS, size);
const HASH = 'ctrlmesh.kusionstack.io/sharding-hash';



/** Every unit (bucket@cluster) granted by the tables, with the shards granting it. */
function owners(tables: readonly RouteTable[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const t of tables) for (const c of t.clusters) for (const b of c.buckets) out.set(`${b}@${c.name}`, [...(out.get(`${b}@${c.name}`) ?? []), t.shard]);
  return out;
}

/** Each of the 32 buckets of the bed's cluster granted, to one of `shards` shards only (a withdrawn shard keeps an empty table). */
function expectOneOwnerEach(tables: readonly RouteTable[], shards: number): void {
  expect(tables.filter((t) => t.clusters.some((c) => c.buckets.length > 0))).toHaveLength(shards);
  const granted = owners(tables);
  expect(granted.size).toBe(32);
  for (const [unit, by] of granted) expect(by, unit).toHaveLength(1);
}

describe('bad state never wedges or crashes: corrupt store, corrupt handover record, deleted bucket, restart after loss', () => {
  const a = cluster(0).name;
  const solo = `${NS}/solo`;
  const soloShard = `${a}/solo`;
  const roll = `${NS}/roll`;
  let nats: Awaited<ReturnType<typeof privateNats>>;
  let hub: HubHandle;
  let agent: AgentHandle;
  let nc: NatsConnection;
  let proxy: TestProxy | undefined;
  const dirs: string[] = [];
  const kc = kubeConfigFor(cluster(0));
  const applied = (): number => proxy?.proxy.controller.current?.table.version ?? -1;
  const readyz = async (harness: TestProxy): Promise<{ status: number; text: string }> => {
    const res = await fetch(`${harness.proxy.opsUrl}/readyz`);
    return { status: res.status, text: await res.text() };
  };
  const status = (operator: string) => hub.status().operators.find((o) => o.operator === operator);
  /** A proxy of `shard` of `solo` whose store file holds `stored` before it starts. */
  const proxyWithStore = async (shard: string, stored: string): Promise<TestProxy> => {
    const dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-recovery-proxy-'));
    dirs.push(dir);
    await mkdir(join(dir, 'store'), { recursive: true });
    await writeFile(join(dir, 'store', 'table.json'), stored);
    const identity = await proxyNatsConfig(nats.nats, solo, shard);
    return startTestProxy({
      dir,
      table: undefined,
      credentialsPath: testbed().kubeconfigPath,
      source: () => new NatsRouteSource({ nats: identity, trusted: [routeSignerKey(nats.nats)], operator: solo, shard, from: `${shard}-pod`, logger: silent, reackMs: 500 }),
    });
  };

  beforeAll(async () => {
    nats = await privateNats();
    hub = await runHub(nats.nats, 'hub-recovery-1', { tokens: bootstrapTokens(a) });
    await eventually(() => expect(hub.isLeader()).toBe(true));
    agent = await runAgent({ registryName: a, bed: cluster(0), nats: nats.nats, webhook: undefined });
    nc = await observe(nats.nats, { maxReconnectAttempts: -1, reconnectTimeWait: 200 });
    await ensureNamespace(kc, NS);
    await eventually(() => apply(kc, handWrittenConfig(NS, 'solo', ['0', '1'], HASH)));
    await eventually(() => apply(kc, rollRootOf(2)));
    await eventually(async () => {
      expect((await routeTables(nc, solo)).map((t) => t.shard)).toEqual([soloShard]);
      expectOneOwnerEach(await routeTables(nc, roll), 2);
    }, 30_000);
    // The shards' proxies are up, as far as the hub can tell: units may move to them.
    await serveShards(nats.nats, nc, roll, `${a}/roll-1-normal`, `${a}/roll-2-normal`);
  }, 120_000);

  afterAll(async () => {
    await deleteShardingConfigs(kc, NS, 'solo', 'roll');
    await proxy?.close();
    await nc?.close();
    await agent?.stop();
    await hub?.stop();
    await nats?.cleanup();
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it('a proxy whose stored table is truncated starts, waits unready, and serves once NATS gives it a table', async () => {
    const genuine = (await routeTables(nc, solo))[0] as RouteTable;
    const whole = JSON.stringify({ table: genuine, contactAt: Date.now() });
    // No table in NATS for this shard and an empty store: up, unready, saying why.
    const ghost = await proxyWithStore(`${a}/ghost`, '');
    try {
      await eventually(async () => {
        const ready = await readyz(ghost);
        expect(ready.status).toBe(503);
        expect(ready.text).toContain('no route table yet');
      });
    } finally {
      await ghost.close();
    }
    proxy = await proxyWithStore(soloShard, whole.slice(0, whole.length / 2));
    await eventually(() => expect(applied()).toBe(genuine.version));
    await eventually(async () => expect((await readyz(proxy as TestProxy)).status).toBe(200));
    // The corrupt file was replaced by the applied table.
    await eventually(async () => expect(parseStoredTable(await readFile((proxy as TestProxy).storePath, 'utf8'), 'store')).toMatchObject({ table: { version: genuine.version } }));
  });

  it('a malformed handover record is quarantined and replaced; the operator recovers, every unit owned by one shard', async () => {
    const state = await new Kvm(nc).open(Buckets.state);
    const key = Keys.handover(roll);
    const before = versions(await routeTables(nc, roll));
    const garbage = '{"schema": 1, "operator": "operator-recovery/roll", "effective": {"x": [';
    const revision = await state.put(key, garbage);
    await eventually(async () => {
      expect((await state.get(Keys.quarantine(key, revision)))?.string()).toBe(garbage);
      const stored = await state.get(key);
      expect(stored?.revision).toBeGreaterThan(revision);
      expect(decodeMessage(Messages.handoverState, stored?.value ?? new Uint8Array()).ok).toBe(true);
    }, 20_000);
    // Not wedged: a change of plan goes through, with handovers, to one owner per unit.
    await apply(kc, rollRootOf(3));
    await serveShards(nats.nats, nc, roll, `${a}/roll-3-normal`);
    await eventually(async () => {
      const tables = await routeTables(nc, roll);
      expectOneOwnerEach(tables, 3);
      expect(status(roll)?.pending).toEqual([]);
      for (const [shard, version] of Object.entries(before)) expect(versions(tables)[shard]).toBeGreaterThan(version);
    }, 30_000);
  });

  it('the routes bucket deleted under a running hub is created again, with versions above the old ones, and the proxy follows', async () => {
    const before = { ...versions(await routeTables(nc, solo)), ...versions(await routeTables(nc, roll)) };
    const proxyBefore = applied();
    expect(proxyBefore).toBe(before[soloShard]);
    await (await jetstreamManager(nc)).streams.delete(`KV_${Buckets.routes}`);
    await eventually(async () => {
      const tables = [...(await routeTables(nc, solo)), ...(await routeTables(nc, roll))];
      expect(Object.keys(versions(tables)).sort()).toEqual(Object.keys(before).sort());
      for (const t of tables) expect(t.version, t.shard).toBeGreaterThan(before[t.shard] as number);
      expectOneOwnerEach(await routeTables(nc, roll), 3);
    }, 30_000);
    // The proxy's watch sees the bucket created again and reads it from the start.
    await eventually(() => expect(applied()).toBeGreaterThan(proxyBefore), 30_000);
    expect((await readyz(proxy as TestProxy)).status).toBe(200);
  });

  it('the lease bucket deleted: a hub creates it again and the fleet has a leader that publishes', async () => {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete(`KV_${Buckets.hub}`);
    await eventually(async () => expect((await jsm.streams.info(`KV_${Buckets.hub}`)).config.max_age).toBeGreaterThan(0), 20_000);
    await eventually(() => expect(hub.isLeader()).toBe(true), 20_000);
    const before = versions(await routeTables(nc, solo));
    await apply(kc, handWrittenConfig(NS, 'solo', ['0', '1', '2'], HASH));
    await eventually(async () => {
      const [table] = await routeTables(nc, solo);
      expect(table?.clusters.flatMap((c) => c.buckets)).toEqual([0, 1, 2]);
      expect(table?.version).toBeGreaterThan(before[soloShard] as number);
    }, 20_000);
  });

  it('a hub restarted after bucket loss publishes above every old version, and an ack above them grants nothing', async () => {
    const before = { ...versions(await routeTables(nc, solo)), ...versions(await routeTables(nc, roll)) };
    const proxyBefore = applied();
    const leaving = `${a}/roll-3-normal`;
    await hub.stop();
    await (await jetstreamManager(nc)).streams.delete(`KV_${Buckets.routes}`);
    // An acknowledgement far above any version, left in the state bucket (how a restart at v1 used to grant early).
    const state = await new Kvm(nc).open(Buckets.state);
    const forged: Ack = { schema: MESSAGE_SCHEMA_VERSION, operator: roll, shard: leaving, version: 10 ** 15, ackedAt: new Date().toISOString() };
    await state.put(Keys.ack(roll, leaving), encodeMessage(Messages.ack, forged));
    hub = await runHub(nats.nats, 'hub-recovery-2', { tokens: bootstrapTokens(a) });
    await eventually(() => expect(hub.isLeader()).toBe(true), 20_000);
    await eventually(async () => {
      const tables = [...(await routeTables(nc, solo)), ...(await routeTables(nc, roll))];
      expect(Object.keys(versions(tables)).sort()).toEqual(Object.keys(before).sort());
      for (const t of tables) expect(t.version, t.shard).toBeGreaterThan(before[t.shard] as number);
    }, 30_000);
    await eventually(() => expect(applied()).toBeGreaterThan(proxyBefore), 30_000);
    await eventually(() => expect(status(solo)?.shards[0]?.acknowledgedVersion).toBe(applied()), 20_000);
    // Shard 3's units move; its forged ack is above what was published for it, so they wait for the lease.
    const revokedFrom = Date.now();
    await apply(kc, rollRootOf(2));
    await eventually(async () => {
      expectOneOwnerEach(await routeTables(nc, roll), 2);
      expect(status(roll)?.pending).toEqual([]);
    }, 30_000);
    const moved = (status(roll)?.history ?? []).filter((h) => h.from === leaving && h.revokedAt >= revokedFrom - 1_000);
    expect(moved.length).toBeGreaterThan(0);
    for (const h of moved) {
      expect(h.grantedBy).toBe('lease-expiry');
      expect((h.grantedAt as number) - h.revokedAt).toBeGreaterThanOrEqual(3_000);
    }
  });
});
