/**
 * The cost of the bus's security: the same traffic on an open nats-server (plain TCP, no auth) and on a
 * secure one (TLS with the bed's CA, decentralized JWT auth, each process with its role's identity), started side
 * by side and measured in alternating order within each round, so a burst of other work on the machine lands on
 * both. Not a benchmark of its own (main.ts skips this file): bench/hub.ts adds these rows to its table.
 */
import { generateKeyPairSync, sign as cryptoSign, verify as cryptoVerify } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { KvWatchInclude, type KV } from '@nats-io/kv';
import { createServer } from '@nats-io/nkeys';
import type { Subscription } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { natsClientConfig, startNats, type NatsEndpoint, type NatsHandle } from '../src/dev/index.js';
import { registerCluster } from '../src/agent/register.js';
import { HUB_DEFAULTS, startHub, type HubHandle } from '../src/hub/index.js';
import {
  Keys,
  MESSAGE_SCHEMA_VERSION,
  Messages,
  RouteTableSchema,
  Subjects,
  connectNats,
  createBuckets,
  decodeMessage,
  encodeMessage,
  RouteTableKind,
  openRouteTable,
  publishMessage,
  publishRouteTable,
  routeSigner,
  subscribeMessages,
  serveWatches,
  watchRouteTable,
  type ClusterReport,
  type ControlBuckets,
  type NatsClientConfig,
  type NatsLink,
  type RouteSigner,
  type RouteTable,
  type Watch,
} from '../src/transport/index.js';
import { percentile, round, type BenchRow } from './harness.js';

/** Rounds per row; each round measures open and secure once, in alternating order. */
const ROUNDS = 7;
const HEARTBEATS = 20_000;
const REPORTS = 5_000;
const STORED_REPORTS = 2_000;
const STORED_WARMUP = 200;
/** Few: nkeys signs and verifies in pure JS (tweetnacl), tens of ms per table on a loaded machine. */
const TABLES = 50;
const CONNECTS = 10;
/** Messages a publisher may be ahead of its receiver (beyond that it waits for half of them). */
const HEARTBEAT_WINDOW = 2_000;
const REPORT_WINDOW = 250;
/** Every wait for a receiver is bounded. */
const STALL_MS = 60_000;

const CLUSTER = 'bench-bus';
const TOKEN = 'bench-bus-token';
const OPERATOR = 'bench/tables';
const SHARD = 'tables-0';
const ROUTE_TABLE = { kind: 'RouteTable', schema: RouteTableSchema } as const;

export function simulatedReport(cluster: string, now: Date): ClusterReport {
  return {
    schema: MESSAGE_SCHEMA_VERSION,
    cluster,
    sentAt: now.toISOString(),
    hash: { algorithm: 'fnv', bucketCount: 32, labels: { hash: 'ctrlmesh.kusionstack.io/sharding-hash', namespace: 'ctrlmesh.kusionstack.io/namespace', control: 'ctrlmesh.kusionstack.io/control' } },
    shardingConfigs: [],
    circuitBreakers: [],
    faultInjections: [],
    pods: [],
    namespaces: Array.from({ length: 20 }, (_, i) => ({ name: `ns-${i}`, labels: {} })),
    objectCounts: Array.from({ length: 20 }, (_, i) => ({ namespace: `ns-${i}`, resource: 'configmaps', count: 10 + i })),
  };
}

/** A shard's table as the hub writes it: 2 clusters with a real CA each, half the buckets, owners of the rest. */
function benchTable(caPem: string): RouteTable {
  const cluster = (name: string, first: number): RouteTable['clusters'][number] => ({
    name,
    server: `https://${name}.clusters.example.com:6443`,
    caPem,
    buckets: Array.from({ length: 16 }, (_, i) => first + i),
    bucketOwners: Object.fromEntries(Array.from({ length: 16 }, (_, i) => [String((first + 16 + i) % 32), 'tables-1'])),
    limits: [
      {
        relateResources: [{ apiGroups: ['apps'], resources: ['deployments', 'statefulsets'] }],
        selector: { matchExpressions: [{ key: 'team', operator: 'In', values: ['falcon', 'heron'] }] },
      },
    ],
  });
  return {
    schema: 1,
    operator: OPERATOR,
    shard: SHARD,
    version: 0,
    issuedAt: new Date().toISOString(),
    homeCluster: 'east-1',
    leaderElectionName: 'bench-operator-leader',
    hashAlgorithm: 'kusionstack',
    bucketCount: 32,
    labels: { hash: 'ctrlmesh.kusionstack.io/shard-hash', namespace: 'ctrlmesh.kusionstack.io/namespace', control: 'ctrlmesh.kusionstack.io/control' },
    leaseSeconds: 15,
    clusters: [cluster('east-1', 0), cluster('west-2', 16)],
  };
}

/** A count that receivers raise and senders wait on (bounded). */
class Mark {
  value = 0;
  private waiters: { at: number; resolve: () => void }[] = [];

  raise(value: number): void {
    if (value <= this.value) return;
    this.value = value;
    const due = this.waiters.filter((w) => w.at <= value);
    if (due.length === 0) return;
    this.waiters = this.waiters.filter((w) => w.at > value);
    for (const w of due) w.resolve();
  }

  until(at: number, what: string): Promise<void> {
    if (this.value >= at) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${what}: stuck at ${this.value}/${at} after ${STALL_MS / 1000} s`)), STALL_MS);
      this.waiters.push({ at, resolve: () => (clearTimeout(timer), resolve()) });
    });
  }
}

/** Sends `count` messages as fast as the receiver keeps up (at most `window` unreceived), then waits for the last. */
async function pump(count: number, window: number, send: (i: number) => void, received: Mark, what: string): Promise<void> {
  for (let i = 0; i < count; i++) {
    if (i - received.value >= window) await received.until(i - window / 2, what);
    send(i);
  }
  await received.until(count, what);
}

/**
 * CPU µs a process's live threads have run so far, from /proc/<pid>/task/<tid>/schedstat (nanoseconds; /proc's stat
 * counts 10 ms ticks, too coarse for a one-second run); with `descendants`, those of its live descendants too, for a
 * server that serves from worker processes (the proxy-workers probe): finding them reads every process's stat, so
 * only such a server asks. nats-server's threads live as long as it does.
 */
export async function processCpuUs(pid: number | undefined, options: { descendants?: boolean } = {}): Promise<number> {
  if (pid === undefined) return 0;
  let ns = 0;
  for (const member of [pid, ...(options.descendants ? await descendants(pid) : [])]) {
    for (const tid of await readdir(`/proc/${member}/task`).catch(() => [])) {
      const text = await readFile(`/proc/${member}/task/${tid}/schedstat`, 'utf8').catch(() => '0');
      ns += Number(text.split(' ')[0]);
    }
  }
  return ns / 1000;
}

/** The machine's busy and total CPU ticks so far (/proc/stat: user nice system idle iowait irq softirq steal). */
async function machineTicks(): Promise<{ busy: number; total: number }> {
  const ticks = (await readFile('/proc/stat', 'utf8')).slice(0, 256).split('\n', 1)[0]!.trim().split(/\s+/u).slice(1, 9).map(Number);
  const total = ticks.reduce((sum, t) => sum + t, 0);
  return { busy: total - ticks[3]! - ticks[4]!, total };
}

/**
 * Waits at least 2 s, then until `quiet` holds of two readings half a second apart (at most 20 s more): what the
 * last storm or load touched has let it go.
 */
async function untilQuietBy<T>(read: () => Promise<T>, quiet: (before: T, after: T) => boolean): Promise<void> {
  await sleep(2000);
  for (const deadline = Date.now() + 20_000; Date.now() < deadline; ) {
    const before = await read();
    await sleep(500);
    if (quiet(before, await read())) return;
  }
}

/**
 * Until the whole machine uses under a quarter of one core: every process a storm touched (the proxy, the API
 * server, the client, the kernel's sockets) has let it go.
 */
export function untilMachineQuiet(): Promise<void> {
  const cores = availableParallelism();
  return untilQuietBy(machineTicks, (before, after) => {
    const total = after.total - before.total;
    return total > 0 && ((after.busy - before.busy) / total) * cores < 0.25;
  });
}

/** Until the process uses under 10 % of a core. */
export function untilQuiet(pid: number | undefined): Promise<void> {
  return untilQuietBy(
    () => processCpuUs(pid),
    (before, after) => after - before < 50_000,
  );
}

/** The live descendants of a process, from every process's parent in /proc/<pid>/stat. */
async function descendants(root: number): Promise<number[]> {
  const parents = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (Number.isInteger(ppid)) parents.set(Number(entry), ppid);
  }
  const found: number[] = [];
  const isBelow = (pid: number): boolean => {
    for (let p = parents.get(pid); p !== undefined && p > 1; p = parents.get(p)) if (p === root) return true;
    return false;
  };
  for (const pid of parents.keys()) if (isBelow(pid)) found.push(pid);
  return found;
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** One nats-server and the bench's connections to it, each with its role's identity (secure) or none (open). */
interface Side {
  label: 'open' | 'secure';
  server: NatsHandle;
  endpoint: NatsEndpoint;
  signingSeed: string;
  signer: RouteSigner;
  agentConfig: NatsClientConfig;
  /** Hub identity: receives heartbeats and reports, writes route tables. */
  hub: NatsLink;
  /** Agent identity of CLUSTER: publishes its heartbeats and reports. */
  agent: NatsLink;
  /** Proxy identity of OPERATOR/SHARD: watches its route table. */
  proxy: NatsLink;
  buckets: ControlBuckets;
  subscriptions: Subscription[];
  watches: Pick<Watch, 'stop'>[];
  heartbeats: Mark;
  reports: Mark;
  /** Route tables seen by the proxy: version - tableBase. */
  tables: Mark;
  tableBase: number;
  tableRevision: number;
  realHub?: HubHandle;
  /** Reports the real hub stored in KV: marker - reportBase, and how many entries the KV watch saw. */
  stored: Mark;
  storedEntries: number;
  reportBase: number;
  /** The state stream's last sequence before the first report to the real hub. */
  stateSeq0: number;
}

async function startSide(label: Side['label'], dir: string, caPem: string, logger: Logger): Promise<Side> {
  const server = await startNats({ dir, security: label, logger });
  const endpoint: NatsEndpoint = { url: server.url, ...(server.security ? { security: server.security } : {}) };
  const auth = server.security?.auth;
  const signingSeed = auth ? (await readFile(auth.routeSigningSeed, 'utf8')).trim() : new TextDecoder().decode(createServer().getSeed());
  const connect = async (name: string, config: NatsClientConfig): Promise<NatsLink> => connectNats({ config, name: `bench-${label}-${name}`, logger });
  const agentConfig = await natsClientConfig(endpoint, { role: 'agent', cluster: CLUSTER });
  const hub = await connect('hub', await natsClientConfig(endpoint, { role: 'hub' }));
  const side: Side = {
    label,
    server,
    endpoint,
    signingSeed,
    signer: routeSigner(signingSeed),
    agentConfig,
    hub,
    agent: await connect('agent', agentConfig),
    proxy: await connect('proxy', await natsClientConfig(endpoint, { role: 'proxy', operator: OPERATOR, shard: SHARD })),
    buckets: await createBuckets({ js: hub.js, replicas: 1, leaseTtlMs: HUB_DEFAULTS.leaseTtlMs }),
    subscriptions: [],
    watches: [],
    heartbeats: new Mark(),
    reports: new Mark(),
    tables: new Mark(),
    tableBase: 0,
    tableRevision: 0,
    stored: new Mark(),
    storedEntries: 0,
    reportBase: 0,
    stateSeq0: 0,
  };
  side.subscriptions.push(
    // The hub's side of the proxy's feed: proxies read KV only through feeds a hub opens.
    serveWatches({ link: hub, logger }),
    subscribeMessages({
      link: hub,
      subject: Subjects.heartbeat(CLUSTER),
      kind: Messages.heartbeat,
      logger,
      handler: () => side.heartbeats.raise(side.heartbeats.value + 1),
    }),
    subscribeMessages({
      link: hub,
      subject: Subjects.report(CLUSTER),
      kind: Messages.clusterReport,
      logger,
      handler: () => side.reports.raise(side.reports.value + 1),
    }),
  );
  await hub.nc.flush();
  // The table's key exists before the proxy watches it; every later write is a compare-and-set on its revision.
  side.tableRevision = await publishRouteTable(side.buckets.routes, side.signer, benchTable(caPem), 0);
  side.watches.push(
    watchRouteTable({
      link: side.proxy,
      operator: OPERATOR,
      shard: SHARD,
      logger,
      trusted: [side.signer.publicKey],
      onTable: (table) => side.tables.raise(table.version - side.tableBase),
    }),
  );
  return side;
}

async function stopSide(side: Side): Promise<void> {
  for (const w of side.watches) w.stop();
  for (const s of side.subscriptions) s.unsubscribe();
  await side.realHub?.stop();
  await Promise.all([side.hub.close(), side.agent.close(), side.proxy.close()]);
  await side.server.stop();
}

interface Sample {
  perSec: number;
  cpuUs: number;
  serverCpuUs: number;
}

/** Wall clock, this process's CPU and the nats-server's CPU around `body`, per item. */
async function measure(side: Side, items: number, body: () => Promise<void>): Promise<Sample> {
  const pid = side.server.pid();
  const server0 = await processCpuUs(pid);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await body();
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const server1 = await processCpuUs(pid);
  return { perSec: (items * 1000) / wallMs, cpuUs: (cpu.user + cpu.system) / items, serverCpuUs: (server1 - server0) / items };
}

interface Phase {
  case: string;
  items: number;
  /** Untimed items per side before the rounds. */
  warmup: number;
  /** Sends `items`; resolves when the receiver has them all. */
  run(side: Side, items: number): Promise<void>;
  extra?: (sides: Side[]) => Promise<Record<string, number>> | Record<string, number>;
}

/** ROUNDS rounds of open and secure (order alternating); medians over rounds, ratios taken within each round. */
async function interleaved(sides: [Side, Side], phase: Phase, progress: (m: string) => void): Promise<BenchRow> {
  for (const side of sides) await phase.run(side, phase.warmup);
  const samples: [Sample[], Sample[]] = [[], []];
  for (let r = 0; r < ROUNDS; r++) {
    progress(`${phase.case}: round ${r + 1}/${ROUNDS}`);
    for (const k of r % 2 === 0 ? [0, 1] : [1, 0]) {
      const side = sides[k]!;
      samples[k]!.push(await measure(side, phase.items, () => phase.run(side, phase.items)));
    }
  }
  const [open, secure] = samples;
  const within = (f: (o: Sample, s: Sample) => number): number => median(open.map((o, r) => f(o, secure[r]!)));
  const of = (runs: Sample[], f: (s: Sample) => number): number => median(runs.map(f));
  return {
    case: phase.case,
    items: phase.items,
    openPerSec: Math.round(of(open, (s) => s.perSec)),
    securePerSec: Math.round(of(secure, (s) => s.perSec)),
    openCpuUs: round(of(open, (s) => s.cpuUs), 1),
    secureCpuUs: round(of(secure, (s) => s.cpuUs), 1),
    openServerCpuUs: round(of(open, (s) => s.serverCpuUs), 1),
    secureServerCpuUs: round(of(secure, (s) => s.serverCpuUs), 1),
    secureOverOpenWall: round(within((o, s) => o.perSec / s.perSec), 2),
    secureOverOpenCpu: round(within((o, s) => s.cpuUs / o.cpuUs), 2),
    ...(open.every((o) => o.serverCpuUs > 0) ? { secureOverOpenServerCpu: round(within((o, s) => s.serverCpuUs / o.serverCpuUs), 2) } : {}),
    ...(await phase.extra?.(sides)),
  };
}

function connectPhase(logger: Logger): Phase {
  return {
    case: 'bus connect: agent connects, flushes, closes, one at a time (secure: TLS handshake, nonce signed, JWT)',
    items: CONNECTS,
    warmup: 2,
    run: async (side, items) => {
      for (let i = 0; i < items; i++) {
        const link = await connectNats({ config: side.agentConfig, name: `bench-${side.label}-connect`, logger });
        await link.nc.flush();
        await link.close();
      }
    },
  };
}

function heartbeatPhase(): Phase {
  return {
    case: 'bus heartbeats: agent -> hub subscriber (subscribeMessages, validated)',
    items: HEARTBEATS,
    warmup: 2_000,
    run: async (side, items) => {
      side.heartbeats = new Mark();
      const subject = Subjects.heartbeat(CLUSTER);
      const send = (): void =>
        publishMessage(side.agent, subject, Messages.heartbeat, { schema: MESSAGE_SCHEMA_VERSION, cluster: CLUSTER, sentAt: new Date().toISOString(), apiServerReachable: true });
      await pump(items, HEARTBEAT_WINDOW, send, side.heartbeats, `${side.label} heartbeats`);
    },
    extra: () => ({ bytesPerItem: encodeMessage(Messages.heartbeat, { schema: MESSAGE_SCHEMA_VERSION, cluster: CLUSTER, sentAt: new Date().toISOString(), apiServerReachable: true }).length }),
  };
}

function reportPhase(): Phase {
  return {
    case: 'bus reports: agent -> hub subscriber (subscribeMessages, validated); publish + receive only',
    items: REPORTS,
    warmup: 500,
    run: async (side, items) => {
      side.reports = new Mark();
      const report = simulatedReport(CLUSTER, new Date());
      await pump(items, REPORT_WINDOW, () => publishMessage(side.agent, Subjects.report(CLUSTER), Messages.clusterReport, report), side.reports, `${side.label} reports`);
    },
    extra: () => ({ bytesPerItem: encodeMessage(Messages.clusterReport, simulatedReport(CLUSTER, new Date())).length }),
  };
}

function tablePhase(caPem: string): Phase {
  const table = benchTable(caPem);
  return {
    case: 'bus route tables: hub signs, compare-and-set into KV -> proxy watchRouteTable verifies; end to end',
    items: TABLES,
    warmup: 5,
    run: async (side, items) => {
      side.tables = new Mark();
      side.tableBase = table.version;
      for (let i = 1; i <= items; i++) {
        side.tableRevision = await publishRouteTable(
          side.buckets.routes,
          side.signer,
          { ...table, version: side.tableBase + i, issuedAt: new Date().toISOString() },
          side.tableRevision,
        );
      }
      table.version = side.tableBase + items;
      await side.tables.until(items, `${side.label} route tables`);
    },
    extra: (sides) => ({ bytesPerItem: sides[0]!.signer.seal(RouteTableKind, table).length }),
  };
}

/** The report path into KV through a real hub (startHub, leader, the cluster registered with its bootstrap token). */
function storedReportPhase(): Phase {
  return {
    case: 'bus reports: agent -> real hub (startHub) -> stored in KV -> seen by a KV watch; end to end',
    items: STORED_REPORTS,
    warmup: STORED_WARMUP,
    run: async (side, items) => {
      side.stored = new Mark();
      const base = side.reportBase;
      const report = simulatedReport(CLUSTER, new Date());
      const first = report.objectCounts[0]!;
      // The hub stores a report only if it differs from the last one (sentAt aside): the first count is the marker.
      const send = (i: number): void => {
        first.count = base + i + 1;
        publishMessage(side.agent, Subjects.report(CLUSTER), Messages.clusterReport, report);
      };
      await pump(items, REPORT_WINDOW, send, side.stored, `${side.label} stored reports`);
      side.reportBase = base + items;
    },
    // Over all reports sent (warm-up included): the share the hub stored (state stream sequence), and the share
    // the KV watch saw (the state bucket keeps one revision per key: a watch that lags skips superseded values).
    extra: async (sides) => {
      const sent = sides.length * (STORED_WARMUP + ROUNDS * STORED_REPORTS);
      let stored = 0;
      for (const side of sides) stored += (await side.buckets.state.status()).streamInfo.state.last_seq - side.stateSeq0;
      return { storedFraction: round(stored / sent, 3), watchSawFraction: round(sides.reduce((n, s) => n + s.storedEntries, 0) / sent, 3) };
    },
  };
}

/** A leader hub on the side, the bench cluster registered with its bootstrap token, and a watch on its report key. */
async function startRealHub(side: Side, caPem: string, logger: Logger): Promise<void> {
  const auth = side.endpoint.security?.auth;
  side.realHub = await startHub(
    {
      ...HUB_DEFAULTS,
      nats: await natsClientConfig(side.endpoint, { role: 'hub' }),
      tokens: [{ cluster: CLUSTER, token: TOKEN }],
      signingSeed: side.signingSeed,
      ...(auth ? { agentIssuer: { seed: (await readFile(auth.issuerSeed, 'utf8')).trim(), account: auth.accountPublicKey } } : {}),
      identity: `bench-bus-${side.label}`,
      listen: { host: '127.0.0.1', port: 0 },
    },
    { logger },
  );
  for (let i = 0; !side.realHub.isLeader(); i++) {
    if (i > 300) throw new Error(`the ${side.label} bench hub did not become leader`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const bootstrap = await connectNats({ config: await natsClientConfig(side.endpoint, { role: 'bootstrap' }), name: `bench-${side.label}-bootstrap`, logger });
  try {
    // As an agent registers: asked again until a hub that has read its buckets answers.
    await registerCluster({ link: bootstrap, identity: { name: CLUSTER, labels: {}, server: 'https://127.0.0.1:1', caPem }, token: TOKEN, logger, signal: AbortSignal.timeout(60_000) });
  } finally {
    await bootstrap.close();
  }
  side.stateSeq0 = (await side.buckets.state.status()).streamInfo.state.last_seq;
  void watchStored(side, side.buckets.state, logger);
}

async function watchStored(side: Side, state: KV, logger: Logger): Promise<void> {
  const iter = await state.watch({ key: Keys.report(CLUSTER), include: KvWatchInclude.UpdatesOnly });
  side.watches.push({ stop: () => iter.stop() });
  try {
    for await (const entry of iter) {
      if (entry.operation !== 'PUT') continue;
      const decoded = decodeMessage(Messages.clusterReport, entry.value);
      if (!decoded.ok) continue;
      side.storedEntries++;
      side.stored.raise((decoded.value.objectCounts[0]?.count ?? 0) - side.reportBase);
    }
  } catch (err) {
    logger.warn({ err }, 'the stored-report watch ended');
  }
}

/**
 * Mean CPU µs per call over at least `minMs` of CPU and 5 calls, after 3 untimed ones. Not timePerOp: its 1,000
 * warm-up calls take half a minute when one call is a pure-JS signature.
 */
function cpuUsPerOp(fn: () => void, minMs: number): number {
  for (let i = 0; i < 3; i++) fn();
  let ops = 0;
  const start = process.cpuUsage();
  let elapsedUs = 0;
  while (elapsedUs < minMs * 1000 || ops < 5) {
    for (let i = 0; i < 5; i++) fn();
    ops += 5;
    const used = process.cpuUsage(start);
    elapsedUs = used.user + used.system;
  }
  return elapsedUs / ops;
}

/**
 * seal+open of one table against encodeMessage+decodeMessage of it: CPU µs per op, in alternating rounds; with
 * seal and open apart, and node:crypto's ed25519 sign+verify of the same bytes as a reference for the signature.
 */
function signatureRow(caPem: string, progress: (m: string) => void): BenchRow {
  const table = benchTable(caPem);
  const signer = routeSigner(new TextDecoder().decode(createServer().getSeed()));
  const trusted = [signer.publicKey];
  const sealed = signer.seal(RouteTableKind, table);
  const text = Buffer.from(encodeMessage(ROUTE_TABLE, table));
  const native = generateKeyPairSync('ed25519');
  const ops: Record<'plain' | 'signed' | 'seal' | 'open' | 'native', () => void> = {
    plain: () => {
      if (!decodeMessage(ROUTE_TABLE, encodeMessage(ROUTE_TABLE, table)).ok) throw new Error('bench table does not decode');
    },
    signed: () => {
      if (!openRouteTable(signer.seal(RouteTableKind, table), trusted).ok) throw new Error('bench table does not verify');
    },
    seal: () => void signer.seal(RouteTableKind, table),
    open: () => void openRouteTable(sealed, trusted),
    native: () => {
      if (!cryptoVerify(null, text, native.publicKey, cryptoSign(null, text, native.privateKey))) throw new Error('node:crypto ed25519 does not verify');
    },
  };
  const names = Object.keys(ops) as (keyof typeof ops)[];
  const runs = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<keyof typeof ops, number[]>;
  for (let r = 0; r < ROUNDS; r++) {
    progress(`route table seal+open vs encode+decode: round ${r + 1}/${ROUNDS}`);
    for (const name of r % 2 === 0 ? names : [...names].reverse()) runs[name].push(cpuUsPerOp(ops[name], name === 'signed' ? 600 : 250));
  }
  return {
    case: 'route table, CPU per op: open = encodeMessage+decodeMessage, secure = seal (sign) + openRouteTable (verify)',
    items: ROUNDS,
    openPerSec: Math.round(1e6 / median(runs.plain)),
    securePerSec: Math.round(1e6 / median(runs.signed)),
    openCpuUs: round(median(runs.plain), 1),
    secureCpuUs: round(median(runs.signed), 1),
    secureOverOpenCpu: round(median(runs.signed.map((s, r) => s / runs.plain[r]!)), 1),
    sealUs: round(median(runs.seal), 1),
    openTableUs: round(median(runs.open), 1),
    nodeCryptoEd25519SignVerifyUs: round(median(runs.native), 1),
    bytesPerItem: sealed.length,
  };
}

/**
 * Starts an open and a secure nats-server side by side, measures each kind of traffic on both, and stops them.
 * `caPem`: a real CA for the route tables' clusters.
 */
export async function busSecurityRows(options: { dir: string; caPem: string; logger: Logger; progress: (m: string) => void }): Promise<BenchRow[]> {
  const { logger, progress, caPem } = options;
  progress('starting an open and a secure nats-server side by side');
  const started = await Promise.allSettled([startSide('open', join(options.dir, 'bus-open'), caPem, logger), startSide('secure', join(options.dir, 'bus-secure'), caPem, logger)]);
  const sides = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  const loads: number[] = [loadavg()[0]!];
  try {
    const failed = started.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
    const pair = sides as [Side, Side];
    const rows: BenchRow[] = [];
    for (const phase of [connectPhase(logger), heartbeatPhase(), reportPhase(), tablePhase(caPem)]) {
      rows.push(await interleaved(pair, phase, progress));
      loads.push(loadavg()[0]!);
    }
    // The real hubs come next: they would withdraw a table of an operator they did not plan, and the bench's own
    // subscribers would validate the reports a second time.
    for (const side of pair) {
      await side.buckets.routes.purge(Keys.route(OPERATOR, SHARD));
      for (const s of side.subscriptions.splice(0)) s.unsubscribe();
    }
    rows.push(signatureRow(caPem, progress));
    progress('starting a real hub on each bus and registering the bench cluster');
    for (const side of pair) await startRealHub(side, caPem, logger);
    rows.push(await interleaved(pair, storedReportPhase(), progress));
    loads.push(loadavg()[0]!);
    rows.push({
      case: 'machine load during the bus rows (1-min load average)',
      cores: availableParallelism(),
      loadMin: round(Math.min(...loads), 2),
      loadMedian: round(percentile([...loads].sort((a, b) => a - b), 0.5), 2),
      loadMax: round(Math.max(...loads), 2),
    });
    return rows;
  } finally {
    await Promise.all(sides.map((side) => stopSide(side)));
  }
}
