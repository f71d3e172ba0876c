import { createServer, connect as tcpConnect } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, CustomObjectsApi, type KubernetesObject } from '@kubernetes/client-node';
import { Kvm } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentHandle } from '../../src/agent/index.js';
import { startNats, startNatsCluster, type NatsClusterHandle, type NatsEndpoint, type NatsHandle } from '../../src/dev/index.js';
import { HUB_DEFAULTS, type HubHandle, type OperatorStatus } from '../../src/hub/index.js';
import { Buckets } from '../../src/transport/index.js';
import { GROUP, apply, bootstrapTokens, ensureNamespace, eventually, observe, proxyNatsConfig, routeSignerKey, runAgent, runHub } from './control-fixture.js';
import {
  ProxyProcess,
  TcpRelay,
  WriteProber,
  clock,
  overlapOf,
  printResults,
  relayPortMap,
  relaysFor,
  type FaultResult,
  type ProbeWrite,
} from './helpers/faults.js';
import { bucket } from './helpers/proxy.js';
import { cluster, kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

/*
 * The fault suite: two shards of one operator, each behind a real proxy process; one unit moves from
 * shard 2 (A, the faulted one) to shard 1 (B) while a fault is on, and writes sent every 20 ms through both
 * proxies show whether the API server ever executed writes of both owners interleaved. Short leases (3 s lease,
 * 1 s grant margin, 500 ms proxy margin) keep it to a few minutes.
 */

const PROXY_LEASE_SECONDS = 3;
const GRANT_MARGIN_MS = 1_000;
const NATS_SERVERS = Number(process.env.CTRLMESH_FAULTS_NATS_SERVERS ?? 3);
const PREFIX = 'faults';
const PARTITION_MS = 20_000;

describe.sequential('faults: one owner per unit under partitions, pauses, crashes and frozen servers', () => {
  const bed = cluster(0);
  const admin = kubeConfigFor(bed).makeApiClient(CoreV1Api);
  const home = kubeConfigFor(bed);
  const opNamespace = uniqueName('faults-op');
  const operator = `${opNamespace}/${PREFIX}-root`;
  const shardName = (i: number): string => `${bed.name}/${PREFIX}-${i}-normal`;
  const results: FaultResult[] = [];
  /** One namespace per bucket, each with ConfigMap `probe`: created before the operator, so weights never change. */
  const probeNamespaces = new Map<number, string>();
  let dir: string;
  let natsCluster: NatsClusterHandle | undefined;
  let single: NatsHandle | undefined;
  let nats: NatsEndpoint;
  const hubs: HubHandle[] = [];
  let agent: AgentHandle | undefined;
  let nc: NatsConnection;
  let relays: TcpRelay[] = [];
  let a: ProxyProcess; // shard 2: the one faulted, losing the unit
  let b: ProxyProcess; // shard 1: gaining it
  let hubCount = 0;

  const root = (size: number): KubernetesObject & { spec: unknown } => ({
    apiVersion: `${GROUP}/v1alpha1`,
    kind: 'ShardingConfig',
    metadata: { name: `${PREFIX}-root`, namespace: opNamespace },
    spec: {
      root: {
        prefix: PREFIX,
        targetStatefulSet: 'faults-operator',
        auto: { shardingSize: size, everyShardReplicas: 1 },
        resourceSelector: [{ apiGroups: [''], resources: ['configmaps'] }],
      },
      selector: { matchLabels: { app: 'faults-operator' } },
    },
  });

  const leader = (): HubHandle => {
    const found = hubs.find((h) => h.isLeader());
    if (!found) throw new Error('no hub leads');
    return found;
  };
  const status = (): OperatorStatus => {
    const found = leader()
      .status()
      .operators.find((o) => o.operator === operator);
    if (!found) throw new Error(`no route tables for ${operator} yet`);
    return found;
  };
  const startHub = async (): Promise<HubHandle> => {
    hubCount += 1;
    const hub = await runHub(nats, `faults-hub-${hubCount}`, {
      tokens: bootstrapTokens(bed.name),
      proxyLeaseSeconds: PROXY_LEASE_SECONDS,
      grantMarginMs: GRANT_MARGIN_MS,
      health: HUB_DEFAULTS.health,
      handoverHistory: 500,
    });
    hubs.push(hub);
    return hub;
  };
  /** The size's shards published, every unit once, no handover pending, every table acknowledged. */
  const settled = async (size: number, acked = true): Promise<OperatorStatus> =>
    eventually(() => {
      const s = status();
      expect(s.shards.filter((x) => Object.values(x.buckets).flat().length > 0).map((x) => x.name)).toEqual(
        Array.from({ length: size }, (_, i) => shardName(i + 1)),
      );
      expect(s.pending).toEqual([]);
      expect(Object.values(s.shards).reduce((n, x) => n + Object.values(x.buckets).flat().length, 0)).toBe(32);
      if (acked) for (const x of s.shards) expect(x.acknowledgedVersion).toBe(x.version);
      return s;
    }, 60_000);

  /** What a proxy of `shard` must serve: the table version the hub published (undefined: not published). */
  const publishedVersion = async (shard: string): Promise<number | undefined> => {
    try {
      return status().shards.find((s) => s.name === shard)?.version;
    } catch {
      return undefined;
    }
  };
  /** Whether a proxy serves its shard's current table: ready, and at the published version. */
  const serving = async (p: ProxyProcess, shard: string): Promise<boolean> => {
    const [ready, version, published] = await Promise.all([p.readyz(), p.tableVersion(), publishedVersion(shard)]);
    return ready.status === 200 && version !== undefined && version === published;
  };
  /** Milliseconds from `since` until both proxies serve their current tables. */
  const recovered = async (since: number, timeoutMs = 90_000): Promise<number> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const ok = await Promise.all([serving(a, shardName(2)), serving(b, shardName(1))]);
      if (ok.every(Boolean)) return Math.round(clock() - since);
      if (Date.now() > deadline) {
        throw new Error(`proxies not serving their current tables ${timeoutMs / 1000} s after recovery started: a ${JSON.stringify(await a.readyz())}, b ${JSON.stringify(await b.readyz())}`);
      }
      await sleep(50);
    }
  };

  /** Both shards settled and served; returns a unit of shard 2 (its bucket's probe namespace). */
  const prepare = async (): Promise<{ ns: string; unit: string }> => {
    await apply(home, root(2));
    const s = await settled(2);
    await recovered(clock(), 60_000);
    const owned = s.shards.find((x) => x.name === shardName(2))?.buckets[bed.name] ?? [];
    const chosen = owned[Math.floor(owned.length / 2)];
    if (chosen === undefined) throw new Error('shard 2 owns no bucket');
    return { ns: probeNamespaces.get(chosen) as string, unit: `${chosen}@${bed.name}` };
  };

  const probe = (ns: string): WriteProber =>
    new WriteProber({ targets: [{ name: 'A', apiUrl: a.apiUrl }, { name: 'B', apiUrl: b.apiUrl }], namespace: ns, configMap: 'probe', intervalMs: 20 });

  /** Waits until a target has had `n` accepted writes since `since`. */
  const acceptedSince = async (prober: WriteProber, target: string, since: number, n = 3, timeoutMs = 60_000): Promise<ProbeWrite> =>
    eventually(() => {
      const w = prober.accepted(target).filter((x) => x.sentAt >= since);
      expect(w.length).toBeGreaterThanOrEqual(n);
      return w[0] as ProbeWrite;
    }, timeoutMs, 20);

  /** The handover of `unit` from shard 2 to shard 1 begun after `since`: how and when (ms since `since`). */
  const handoverOf = (unit: string, since: number): { grantedBy: string; revokeMs: number | null; grantMs: number | null } => {
    try {
      const s = status();
      const found = [...s.history, ...s.pending].find((h) => h.unit === unit && h.from === shardName(2) && h.revokedAt >= since - 1_000);
      if (!found) return { grantedBy: 'none', revokeMs: null, grantMs: null };
      return {
        grantedBy: `${found.grantedBy ?? 'pending'}${found.acknowledgedAt === undefined ? ' (no ack)' : ''}`,
        revokeMs: Math.round(found.revokedAt - since),
        grantMs: found.grantedAt === undefined ? null : Math.round(found.grantedAt - since),
      };
    } catch (err) {
      return { grantedBy: `unknown (${(err as Error).message})`, revokeMs: null, grantMs: null };
    }
  };
  /** When the old owner's proxy first fenced itself after `since` (ms since `since`, from its log). */
  const fenceOf = async (since: number): Promise<number | null> => {
    const [first] = await a.logTimes('lease over', since);
    return first === undefined ? null : Math.round(first - since);
  };
  /** How the old owner answered the writes sent after `since`: status × count. */
  const answersOfA = (writes: readonly ProbeWrite[], since: number): string => {
    const counts = new Map<number, number>();
    for (const w of writes) if (w.target === 'A' && w.sentAt >= since) counts.set(w.status, (counts.get(w.status) ?? 0) + 1);
    return [...counts].sort((x, y) => x[0] - y[0]).map(([st, n]) => `${st}x${n}`).join(' ');
  };

  /** Judges and records one case: the overlap from the writes, the timeline from the hub's record and A's log. */
  const record = async (
    r: { case: string; recoverMs: number | null; since: number; unit: string; note: string },
    writes: readonly ProbeWrite[],
  ): Promise<FaultResult> => {
    const o = overlapOf(writes, 'A', 'B');
    const handover = handoverOf(r.unit, r.since);
    const result: FaultResult = {
      case: r.case,
      overlapMs: o.overlapMs,
      recoverMs: r.recoverMs,
      revokeMs: handover.revokeMs,
      fenceMs: await fenceOf(r.since),
      grantMs: handover.grantMs,
      interleaved: o.interleaved,
      oldOwnerWrites: o.fromAccepted,
      newOwnerWrites: o.toAccepted,
      gapMs: o.gapMs,
      grantedBy: handover.grantedBy,
      note: `${r.note}; A answered after the fault: ${answersOfA(writes, r.since)}`,
    };
    if (o.offending.length > 0) {
      // The evidence, in ms since the fault began: when each write was sent and answered, and its resourceVersion.
      const at = (w: ProbeWrite): string => `sent ${Math.round(w.sentAt - r.since)} answered ${Math.round(w.answeredAt - r.since)} rv ${w.rv}`;
      result.note += `; TWO OWNERS: new owner's first write ${at(o.firstNew as ProbeWrite)}; old owner's after it: ${o.offending.map(at).join(', ')}`;
    }
    results.push(result);
    console.log(`FAULT-RESULT ${JSON.stringify(result)}`);
    return result;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-faults-'));
    if (NATS_SERVERS > 1) {
      natsCluster = await startNatsCluster({ dir: join(dir, 'nats'), servers: NATS_SERVERS });
      nats = natsCluster;
    } else {
      single = await startNats({ dir: join(dir, 'nats') });
      nats = single;
    }
    nc = await observe(nats, { maxReconnectAttempts: -1, reconnectTimeWait: 200 });
    for (let i = 0; probeNamespaces.size < 32; i++) {
      const name = `${opNamespace}-p${i}`;
      const b = bucket(name);
      if (probeNamespaces.has(b)) continue;
      probeNamespaces.set(b, name);
    }
    await Promise.all(
      [...probeNamespaces.values()].map(async (ns) => {
        await admin.createNamespace({ body: { metadata: { name: ns } } });
        await admin.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'probe' } } });
      }),
    );
    await startHub();
    await eventually(() => expect(hubs[0]?.isLeader()).toBe(true), 30_000);
    await startHub();
    agent = await runAgent({ registryName: bed.name, bed, nats, webhook: undefined });
    await ensureNamespace(home, opNamespace);
    await apply(home, root(2));
    await settled(2, false);

    const signer = routeSignerKey(nats);
    const credentials = testbed().kubeconfigPath;
    // A keeps every server's own URL; its process reaches each (and any it learns from the cluster) through a relay.
    relays = await relaysFor(nats.urls ?? [nats.url]);
    a = new ProxyProcess({
      nats: await proxyNatsConfig(nats, operator, shardName(2)),
      portMap: relayPortMap(relays),
      routeSigner: signer,
      operator,
      shard: shardName(2),
      credentials,
      dir: join(dir, 'proxy-a'),
      steppableClock: true,
    });
    b = new ProxyProcess({ nats: await proxyNatsConfig(nats, operator, shardName(1)), routeSigner: signer, operator, shard: shardName(1), credentials, dir: join(dir, 'proxy-b') });
    await Promise.all([a.start(), b.start()]);
    await recovered(clock(), 60_000);
    expect(relays.reduce((n, r) => n + r.connections, 0)).toBeGreaterThan(0);
  }, 240_000);

  afterAll(async () => {
    printResults(results);
    if (process.env.CTRLMESH_FAULTS_KEEP) console.log(`faults: logs kept in ${dir}`);
    await Promise.all([a?.stop(), b?.stop()]);
    for (const r of relays) await r.close();
    await home
      .makeApiClient(CustomObjectsApi)
      .deleteNamespacedCustomObject({ group: GROUP, version: 'v1alpha1', namespace: opNamespace, plural: 'shardingconfigs', name: `${PREFIX}-root` })
      .catch(() => undefined);
    await agent?.stop();
    await Promise.all(hubs.map((h) => h.stop()));
    await nc?.close();
    await natsCluster?.stop();
    await single?.stop();
    await Promise.all([...probeNamespaces.values(), opNamespace].map((name) => admin.deleteNamespace({ name }).catch(() => undefined)));
    if (!process.env.CTRLMESH_FAULTS_KEEP) await rm(dir, { recursive: true, force: true });
  }, 120_000);

  it('the relay holds bytes without closing anything while blackholed, and delivers them on heal', async () => {
    const echo = createServer((s) => s.pipe(s));
    await new Promise<void>((r) => echo.listen(0, '127.0.0.1', () => r()));
    const port = (echo.address() as { port: number }).port;
    const relay = new TcpRelay({ target: { host: '127.0.0.1', port } });
    await relay.start();
    try {
      const socket = tcpConnect({ host: '127.0.0.1', port: relay.port });
      let got = '';
      let closed = false;
      socket.on('data', (d: Buffer) => (got += d.toString()));
      socket.on('close', () => (closed = true));
      await new Promise((r) => socket.once('connect', r));
      socket.write('one;');
      await eventually(() => expect(got).toBe('one;'), 2_000, 10);
      relay.blackhole();
      socket.write('two;');
      await sleep(500);
      expect(got).toBe('one;');
      expect(closed).toBe(false);
      // A connection made during the partition hangs, neither refused nor reset.
      const late = tcpConnect({ host: '127.0.0.1', port: relay.port });
      let lateGot = '';
      late.on('data', (d: Buffer) => (lateGot += d.toString()));
      late.write('late;');
      await sleep(300);
      expect(lateGot).toBe('');
      relay.heal();
      await eventually(() => expect([got, lateGot]).toEqual(['one;two;', 'late;']), 2_000, 10);
      socket.destroy();
      late.destroy();
    } finally {
      await relay.close();
      await new Promise<void>((r) => echo.close(() => r()));
    }
  });

  it('a, b: a proxy cut off silently (no reset) loses its unit by lease expiry, and after healing never serves its revoked table', async () => {
    const { ns, unit } = await prepare();
    const prober = probe(ns);
    try {
      const t0 = clock();
      await acceptedSince(prober, 'A', t0);
      const cutAt = clock();
      for (const r of relays) r.blackhole();
      await apply(home, root(1));
      const firstB = await acceptedSince(prober, 'B', cutAt, 3, 30_000);
      // A fenced itself before B's first write, by its own clock.
      expect((await a.readyz()).text).toMatch(/fenced/);
      // Long enough for the NATS client to notice (2 missed pings of 5 s) and try to reconnect, into the partition.
      await sleep(Math.max(0, cutAt + PARTITION_MS - clock()));
      const beforeHeal = prober.writes.filter((w) => w.sentAt < clock());
      const cut = await record({ case: `a. silent partition of the old owner (blackhole, ${PARTITION_MS / 1000} s)`, recoverMs: null, since: cutAt, unit, note: `new owner's first accepted write sent ${Math.round(firstB.sentAt - cutAt)} ms after the cut` }, beforeHeal);
      const healAt = clock();
      for (const r of relays) r.heal();
      const recoverMs = await recovered(healAt);
      await sleep(2_000);
      const writes = await prober.stop();
      const healed = await record({ case: 'b. partition healed (probing across it)', recoverMs, since: cutAt, unit, note: `healed ${Math.round(healAt - cutAt)} ms after the cut` }, writes);
      expect(healed.overlapMs).toBe(0);
      expect(cut.overlapMs).toBe(0);
      // The old owner fenced itself (by its own clock) before the hub granted the unit elsewhere.
      expect(cut.fenceMs).not.toBeNull();
      expect(cut.grantMs).not.toBeNull();
      expect(cut.fenceMs as number).toBeLessThan(cut.grantMs as number);
      expect(healed.newOwnerWrites).toBeGreaterThan(0);
    } finally {
      for (const r of relays) r.heal();
      await prober.stop();
    }
  }, 180_000);

  it('c: a proxy paused (SIGSTOP) across its lease, then continued, never writes for the unit it lost', async () => {
    const { ns, unit } = await prepare();
    const prober = probe(ns);
    try {
      await acceptedSince(prober, 'A', clock());
      const stopAt = clock();
      a.pause();
      await apply(home, root(1));
      await acceptedSince(prober, 'B', stopAt, 3, 30_000);
      await sleep(Math.max(0, stopAt + (PROXY_LEASE_SECONDS + 4) * 1000 - clock()));
      const contAt = clock();
      a.resume();
      const recoverMs = await recovered(contAt);
      await sleep(2_000);
      const writes = await prober.stop();
      await record({ case: `c. old owner's proxy paused (SIGSTOP ${Math.round(contAt - stopAt)} ms)`, recoverMs, since: stopAt, unit, note: 'writes sent to it meanwhile are answered after SIGCONT' }, writes);
      // A write the proxy had already admitted when it was frozen can reach the API server after the grant: a
      // paused process is what a lease cannot cover without fencing at the API server (docs/control-plane.md).
      // Every write it received from the pause on must be refused.
      expect(overlapOf(writes.filter((w) => w.target !== 'A' || w.sentAt >= stopAt), 'A', 'B').overlapMs).toBe(0);
    } finally {
      a.resume();
      await prober.stop();
    }
  }, 180_000);

  it('d: the hub leader killed mid-handover (no lease release), the standby finishes it', async () => {
    const { ns, unit } = await prepare();
    const prober = probe(ns);
    try {
      await acceptedSince(prober, 'A', clock());
      const old = leader();
      const startAt = clock();
      await apply(home, root(1));
      // Killed once the revocation is decided, before the grant.
      await eventually(() => expect(old.status().operators.find((o) => o.operator === operator)?.pending.some((p) => p.unit === unit)).toBe(true), 90_000, 2);
      const killAt = clock();
      await old.stop({ releaseLease: false });
      hubs.splice(hubs.indexOf(old), 1);
      await acceptedSince(prober, 'B', startAt, 3, 30_000);
      const recoverMs = await recovered(killAt);
      await sleep(1_000);
      const writes = await prober.stop();
      const r = await record({ case: 'd. hub leader killed mid-handover', recoverMs, since: startAt, unit, note: `leader ${old.identity} killed ${Math.round(killAt - startAt)} ms after the change, unit pending; ${leader().identity} leads now` }, writes);
      expect(r.overlapMs).toBe(0);
    } finally {
      await prober.stop();
      if (hubs.length < 2) await startHub();
    }
  }, 180_000);

  it('e: the NATS server under the old owner\'s proxy frozen (SIGSTOP) longer than the lease', async (ctx) => {
    if (!natsCluster) ctx.skip();
    const c = natsCluster as NatsClusterHandle;
    const { ns, unit } = await prepare();
    // The server the old owner's proxy is connected to (by the servers' own account, /connz), frozen under it.
    const kv = await new Kvm(nc).open(Buckets.routes);
    const routesLeader = (await kv.status()).streamInfo.cluster?.leader;
    const frozen = await eventually(async () => {
      for (const server of c.servers) {
        const connz = (await (await fetch(`${server.monitorUrl}/connz?limit=1024`)).json()) as { connections?: { name?: string }[] };
        if (connz.connections?.some((x) => x.name === `ctrlmesh-proxy-${shardName(2)}`)) return server;
      }
      throw new Error('the old owner\'s proxy is connected to no server');
    }, 20_000);
    const prober = probe(ns);
    try {
      await acceptedSince(prober, 'A', clock());
      const freezeAt = clock();
      await frozen.freeze();
      await apply(home, root(1));
      await acceptedSince(prober, 'B', freezeAt, 3, 60_000).catch(() => undefined);
      await sleep(Math.max(0, freezeAt + (PROXY_LEASE_SECONDS + 5) * 1000 - clock()));
      const thawAt = clock();
      frozen.thaw();
      const recoverMs = await recovered(thawAt);
      await sleep(2_000);
      const writes = await prober.stop();
      const r = await record({ case: `e. NATS server frozen (SIGSTOP ${Math.round(thawAt - freezeAt)} ms)`, recoverMs, since: freezeAt, unit, note: `froze ${frozen.name}, the old owner's proxy's server (${frozen.name === routesLeader ? 'also' : 'not'} the routes stream leader)` }, writes);
      expect(r.overlapMs).toBe(0);
    } finally {
      frozen.thaw();
      await prober.stop();
    }
  }, 180_000);

  it('f: the JetStream meta leader killed while the unit moves', async (ctx) => {
    if (!natsCluster) ctx.skip();
    const c = natsCluster as NatsClusterHandle;
    const { ns, unit } = await prepare();
    const prober = probe(ns);
    try {
      await acceptedSince(prober, 'A', clock());
      const meta = await c.metaLeader();
      if (!meta) throw new Error('no meta leader');
      const killAt = clock();
      await meta.kill();
      await apply(home, root(1));
      await acceptedSince(prober, 'B', killAt, 3, 60_000);
      const startAt = clock();
      await meta.start();
      await c.ready(60_000);
      const recoverMs = await recovered(startAt);
      await sleep(1_000);
      const writes = await prober.stop();
      const r = await record({ case: 'f. JetStream meta leader killed', recoverMs, since: killAt, unit, note: `killed ${meta.name}; recoverMs from its restart` }, writes);
      expect(r.overlapMs).toBe(0);
    } finally {
      await prober.stop();
    }
  }, 180_000);

  it('g: 2 of 3 NATS servers down while the unit moves, then back', async (ctx) => {
    if (!natsCluster || natsCluster.servers.length < 3) ctx.skip();
    const c = natsCluster as NatsClusterHandle;
    const { ns, unit } = await prepare();
    const prober = probe(ns);
    const down = c.servers.slice(1);
    try {
      await acceptedSince(prober, 'A', clock());
      const downAt = clock();
      await Promise.all(down.map((s) => s.kill()));
      await apply(home, root(1));
      await sleep(PROXY_LEASE_SECONDS * 1000 + 5_000);
      const upAt = clock();
      await Promise.all(down.map((s) => s.start()));
      await c.ready(60_000);
      await acceptedSince(prober, 'B', downAt, 3, 60_000);
      const recoverMs = await recovered(upAt);
      await sleep(1_000);
      const writes = await prober.stop();
      const r = await record({ case: 'g. 2 of 3 NATS servers down and back', recoverMs, since: downAt, unit, note: `${down.map((s) => s.name).join(', ')} killed for ${Math.round(upAt - downAt)} ms; recoverMs from their restart` }, writes);
      expect(r.overlapMs).toBe(0);
    } finally {
      await Promise.all(down.filter((s) => s.pid() === undefined).map((s) => s.start().catch(() => undefined)));
      await prober.stop();
    }
  }, 180_000);

  it("h: the old owner's proxy killed (SIGKILL) while the unit moves, restarted after the grant", async () => {
    const { ns, unit } = await prepare();
    const prober = probe(ns);
    try {
      await acceptedSince(prober, 'A', clock());
      const killAt = clock();
      await a.kill();
      await apply(home, root(1));
      await acceptedSince(prober, 'B', killAt, 3, 30_000);
      const startAt = clock();
      await a.start();
      const recoverMs = await recovered(startAt);
      await sleep(1_000);
      const writes = await prober.stop();
      const r = await record({ case: "h. old owner's proxy killed (SIGKILL), restarted after the grant", recoverMs, since: killAt, unit, note: `restarted ${Math.round(startAt - killAt)} ms after the kill, from its stored table; recoverMs from the restart` }, writes);
      expect(r.overlapMs).toBe(0);
    } finally {
      await prober.stop();
      if (a.pid === undefined) await a.start().catch(() => undefined);
    }
  }, 180_000);

  it("i: the old owner's wall clock stepped back 60 s, then cut from NATS while the unit moves: it fences on its monotonic clock", async () => {
    const { ns, unit } = await prepare();
    const prober = probe(ns);
    try {
      await acceptedSince(prober, 'A', clock());
      // Its monotonic clock runs on; every lease extension it gets from here on is read on a wall clock a minute behind.
      await a.stepClock(-60_000);
      await sleep(2 * PROXY_LEASE_SECONDS * 1_000);
      await acceptedSince(prober, 'A', clock());
      const cutAt = clock();
      for (const r of relays) r.blackhole();
      await apply(home, root(1));
      const firstB = await acceptedSince(prober, 'B', cutAt, 3, 30_000);
      await sleep(Math.max(0, cutAt + PARTITION_MS - clock()));
      const duringCut = await a.readyz();
      const healAt = clock();
      for (const r of relays) r.heal();
      const recoverMs = await recovered(healAt);
      await sleep(1_000);
      const writes = await prober.stop();
      const r = await record(
        {
          case: "i. old owner's wall clock stepped back 60 s, then cut from NATS (20 s)",
          recoverMs,
          since: cutAt,
          unit,
          note: `new owner's first accepted write sent ${Math.round(firstB.sentAt - cutAt)} ms after the cut; A's /readyz at the end of the cut: ${duringCut.status}; fenceMs from A's log, whose clock was stepped, is not comparable`,
        },
        writes,
      );
      expect(r.overlapMs).toBe(0);
      expect(r.interleaved).toBe(0);
      expect(duringCut.text).toMatch(/fenced/);
      expect(r.newOwnerWrites).toBeGreaterThan(0);
    } finally {
      for (const r of relays) r.heal();
      await prober.stop();
      if (a.clockOffsetMs !== 0) await a.stepClock(-a.clockOffsetMs);
    }
  }, 180_000);
});
