/**
 * Route change -> every proxy applied: the same change, end to end through a real hub, measured
 * on sides started together and measured in interleaved rounds (ROUTE_CHANGE_GROUPS): one secure nats-server (R1
 * buckets) against a secure 3-server cluster (R3 buckets) with 6 proxies and a short hub debounce; then 50 proxies
 * on both, with the hub's default debounce and with the short one. Not a benchmark of its own (main.ts skips this
 * file): bench/hub.ts adds these rows.
 *
 * The change enters at the hub's input, as an agent would send it after a ShardingConfig edit: a ClusterReport on
 * the cluster's report subject (published with the cluster's agent identity; no API server or agent process) whose
 * root ShardingConfigs' resourceSelectors carry a new label value. The hub stores the report in KV, plans, and
 * publishes a new signed table for each shard of each root (their limits changed, no bucket moved, so no handover).
 * One NatsRouteSource per shard (the proxy's own route source, with its shard's proxy identity) receives it, and
 * acknowledges it as a proxy does once applied. The sources run in a worker thread of their own, so the hub's event
 * loop is not the proxies' (a real proxy is a process of its own elsewhere). Measured: from publishing the report
 * until the last source received its new table (`applied`), and until the last acknowledgement reached a subscriber
 * on the hub's subject (`acked`).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { pino, type Logger } from 'pino';
import { natsClientConfig, startNats, startNatsCluster, type NatsEndpoint } from '../src/dev/index.js';
import { registerCluster } from '../src/agent/register.js';
import { HUB_DEFAULTS, startHub, type HubHandle } from '../src/hub/index.js';
import { NatsRouteSource } from '../src/proxy/index.js';
import {
  Buckets,
  MESSAGE_SCHEMA_VERSION,
  Messages,
  Subjects,
  connectNats,
  openBucket,
  publishMessage,
  subscribeAcks,
  type ClusterReport,
  type NatsClientConfig,
  type NatsLink,
  type RouteTable,
} from '../src/transport/index.js';
import { median, processCpuUs } from './bus.js';
import { formatTable, loadRow, percentile, round, seededRandom, type BenchRow } from './harness.js';

/** Rounds; each measures CHANGES_PER_ROUND changes on every side of a group (order rotated). */
const ROUNDS = 10;
const CHANGES_PER_ROUND = 20;
/** Untimed changes per side before the rounds. */
const WARMUP = 3;
/** The short hub debounce: the figure is then the path and not the wait (the default adds its difference). */
const SHORT_DEBOUNCE_MS = 20;
const HEARTBEAT_MS = 2_000;
/** Every wait is bounded. */
const STALL_MS = 60_000;
/** How long a side's route sources may take to connect (TLS, JWT) on a loaded machine. */
const READY_MS = 180_000;
/** Buckets of the bench cluster's hash. */
const BUCKETS = 32;

const CLUSTER = 'bench-prop';
const TOKEN = 'bench-prop-token';
const NAMESPACE = 'bench-prop';
/** The label whose value each change sets in every root's resourceSelector, and that each table then carries. */
const MARKER = 'bench.ctrlmesh.kusionstack.io/change';

/** One side: a NATS deployment, a hub with its debounce, and `proxies` route sources (one per shard). */
export interface SideSpec {
  kind: 'single' | 'cluster';
  proxies: number;
  /** The hub's debounce; HUB_DEFAULTS.debounceMs when absent. */
  debounceMs?: number;
  /**
   * `back-to-back` (default): the next change as soon as the previous one is acknowledged, so it may land in the
   * window the previous pass opened. `isolated`: after a quiet pause of debounce + 100-300 ms (seeded), so each change
   * is the first after a quiet period, as an operator's edit is; the pauses are not in the CPU figures.
   */
  pacing?: 'back-to-back' | 'isolated';
}

/** Sides started together and measured in the same interleaved rounds; groups run one after another. */
export const ROUTE_CHANGE_GROUPS: readonly (readonly SideSpec[])[] = [
  // One server against a 3-server cluster, 6 proxies, short debounce.
  [
    { kind: 'single', proxies: 6, debounceMs: SHORT_DEBOUNCE_MS },
    { kind: 'cluster', proxies: 6, debounceMs: SHORT_DEBOUNCE_MS },
  ],
  // 50 proxies (the target's deployment), the hub at its default debounce (isolated changes, and back-to-back on the cluster) and at
  // the short one, on both deployments.
  [
    { kind: 'single', proxies: 50, pacing: 'isolated' },
    { kind: 'cluster', proxies: 50, pacing: 'isolated' },
    { kind: 'cluster', proxies: 50 },
    { kind: 'single', proxies: 50, debounceMs: SHORT_DEBOUNCE_MS },
    { kind: 'cluster', proxies: 50, debounceMs: SHORT_DEBOUNCE_MS },
  ],
];

/** One root ShardingConfig of the bench cluster: an operator and the names of its auto shards. */
interface Root {
  name: string;
  prefix: string;
  operator: string;
  shards: string[];
}

/**
 * `proxies` shards as roots of equal auto sharding: as many shards per root as divide `proxies` and leave no shard
 * without buckets (KusionStack's runs of ceil(32/n) buckets; e.g. 6 = 1 x 6, 50 = 10 x 5).
 */
function rootsFor(proxies: number): Root[] {
  let perRoot = 1;
  for (let n = Math.min(proxies, BUCKETS); n >= 1; n--) {
    if (proxies % n === 0 && Math.ceil(BUCKETS / n) * (n - 1) < BUCKETS) {
      perRoot = n;
      break;
    }
  }
  return Array.from({ length: proxies / perRoot }, (_, r) => {
    const name = proxies / perRoot === 1 ? 'prop-root' : `prop-root-${r}`;
    const prefix = proxies / perRoot === 1 ? 'prop' : `prop${r}`;
    return { name, prefix, operator: `${NAMESPACE}/${name}`, shards: Array.from({ length: perRoot }, (_, i) => `${CLUSTER}/${prefix}-${i + 1}-normal`) };
  });
}

/** The report an agent would send after every root's resourceSelector was edited to carry `change`. */
function changeReport(change: number, roots: readonly Root[]): ClusterReport {
  return {
    schema: MESSAGE_SCHEMA_VERSION,
    cluster: CLUSTER,
    sentAt: new Date().toISOString(),
    hash: { algorithm: 'kusionstack', bucketCount: BUCKETS, labels: { hash: 'ctrlmesh.kusionstack.io/sharding-hash', namespace: 'ctrlmesh.kusionstack.io/namespace', control: 'ctrlmesh.kusionstack.io/control' } },
    shardingConfigs: roots.map((root) => ({
      namespace: NAMESPACE,
      name: root.name,
      generation: change + 1,
      manifest: {
        apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1',
        kind: 'ShardingConfig',
        metadata: { name: root.name, namespace: NAMESPACE },
        spec: {
          root: {
            prefix: root.prefix,
            targetStatefulSet: `bench-operator-${root.prefix}`,
            auto: { shardingSize: root.shards.length, everyShardReplicas: 1 },
            resourceSelector: [{ relateResources: [{ apiGroups: [''], resources: ['configmaps'] }], selector: { matchLabels: { [MARKER]: String(change) } } }],
            clusters: {},
          },
          controller: { leaderElectionName: `bench-operator-${root.prefix}-leader`, multicluster: true },
          selector: { matchLabels: { app: `bench-operator-${root.prefix}` } },
        },
      },
    })),
    circuitBreakers: [],
    faultInjections: [],
    pods: [],
    namespaces: Array.from({ length: 8 }, (_, i) => ({ name: `ns-${i}`, labels: {} })),
    objectCounts: Array.from({ length: 8 }, (_, i) => ({ namespace: `ns-${i}`, resource: 'configmaps', count: 10 + i })),
  };
}

/** The change a table carries (its limit's marker label), or -1. */
function changeOf(table: RouteTable): number {
  const value = table.clusters[0]?.limits[0]?.selector.matchLabels?.[MARKER];
  return value === undefined ? -1 : Number(value);
}

/** Wall-clock ms comparable between threads (a worker's performance.now() has its own origin). */
const now = (): number => performance.timeOrigin + performance.now();

/** The latest change each shard has reached, and waiters for all of them to reach one. */
class Progress {
  private readonly at = new Map<string, { change: number; when: number }>();
  private waiters: { change: number; resolve: (when: number) => void }[] = [];

  constructor(private readonly shards: readonly string[]) {}

  record(shard: string, change: number, when: number): void {
    const known = this.at.get(shard);
    if (known && known.change >= change) return;
    this.at.set(shard, { change, when });
    this.waiters = this.waiters.filter((w) => {
      const last = this.lastReached(w.change);
      if (last === undefined) return true;
      w.resolve(last);
      return false;
    });
  }

  /** When the last shard reached `change`, once all have. */
  private lastReached(change: number): number | undefined {
    let last = 0;
    for (const shard of this.shards) {
      const known = this.at.get(shard);
      if (!known || known.change < change) return undefined;
      last = Math.max(last, known.when);
    }
    return last;
  }

  until(change: number, what: string): Promise<number> {
    const reached = this.lastReached(change);
    if (reached !== undefined) return Promise.resolve(reached);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const behind = this.shards.filter((s) => (this.at.get(s)?.change ?? -1) < change);
        reject(new Error(`${what}: change ${change} not reached by ${behind.length} shards (${behind.slice(0, 5).join(', ')}...) after ${STALL_MS / 1000} s`));
      }, STALL_MS);
      this.waiters.push({ change, resolve: (when) => (clearTimeout(timer), resolve(when)) });
    });
  }
}

interface Stoppable {
  stop(): Promise<void> | void;
}

interface Side {
  spec: SideSpec;
  label: string;
  debounceMs: number;
  pacing: 'back-to-back' | 'isolated';
  /** The quiet pauses of an isolated side (seeded). */
  random: () => number;
  servers: number;
  replicas: number;
  roots: Root[];
  shards: string[];
  pids: () => (number | undefined)[];
  hub: HubHandle;
  agent: NatsLink;
  /** Version of each shard's table per change: the acks name versions, the tables carry changes. */
  versions: Map<string, Map<number, number>>;
  /**
   * When each shard's versions were acknowledged: an ack may reach this thread before the worker's message about
   * the table it acknowledges, so each is matched with the other whichever comes first.
   */
  ackedAt: Map<string, Map<number, number>>;
  applied: Progress;
  acked: Progress;
  next: number;
  stops: Stoppable[];
  applySamples: number[];
  ackSamples: number[];
  cpuUs: number;
  serverCpuUs: number;
  /** Seconds the hub spent in reconciles (plan, sign, compare-and-set each table), from its histogram. */
  reconcileSeconds: number;
  measured: number;
}

async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + STALL_MS;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not after ${STALL_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** What the sources' worker thread is given: one NatsRouteSource per entry, trusting `trusted`. */
interface SourcesData {
  benchPropSources: { sources: { operator: string; shard: string; nats: NatsClientConfig }[]; trusted: string[] };
}
type SourcesMessage =
  | { type: 'table'; shard: string; change: number; version: number; at: number }
  | { type: 'ready' }
  | { type: 'stopped' }
  | { type: 'error'; message: string };

/** The worker thread's side: start the sources, report every table they receive, acknowledge it, stop when told. */
async function runSources(data: SourcesData['benchPropSources']): Promise<void> {
  const port = parentPort!;
  const post = (message: SourcesMessage): void => port.postMessage(message);
  const logger = pino({ level: 'silent' });
  const sources: NatsRouteSource[] = [];
  // Ready once every source has its connection (its KV watch starts right after).
  const contacted = new Set<string>();
  let readySent = false;
  port.on('message', (message: { type: string }) => {
    if (message.type !== 'stop') return;
    void Promise.all(sources.map((s) => Promise.resolve(s.stop()).catch(() => undefined))).then(() => {
      post({ type: 'stopped' });
      port.close();
    });
  });
  try {
    for (const { operator, shard, nats } of data.sources) {
      const source = new NatsRouteSource({ nats, trusted: data.trusted, operator, shard, from: `bench-${shard}`, logger });
      sources.push(source);
      await source.start({
        onTable: (table) => {
          const at = now();
          post({ type: 'table', shard, change: changeOf(table), version: table.version, at });
          void source.acknowledge(table);
        },
        onContact: (connected) => {
          if (!connected || readySent) return;
          contacted.add(shard);
          if (contacted.size === data.sources.length) {
            readySent = true;
            post({ type: 'ready' });
          }
        },
        onRenewal: () => undefined,
      });
    }
  } catch (err) {
    post({ type: 'error', message: (err as Error).message });
  }
}

if (!isMainThread && (workerData as Partial<SourcesData> | null)?.benchPropSources) void runSources((workerData as SourcesData).benchPropSources);

/** The quiet pause before an isolated change: longer than the debounce window a pass opens. */
function quietMs(debounceMs: number, random: () => number): number {
  return debounceMs + 100 + random() * 200;
}

function sideLabel(spec: SideSpec): string {
  const debounce = spec.debounceMs ?? HUB_DEFAULTS.debounceMs;
  const pacing = spec.pacing === 'isolated' ? `changes ${debounce + 100}-${debounce + 300} ms apart` : 'back-to-back changes';
  return `${spec.kind === 'single' ? '1 server' : '3-server cluster'}, ${spec.proxies} proxies, debounce ${debounce} ms${spec.debounceMs === undefined ? ' (default)' : ''}, ${pacing}`;
}

async function startSide(spec: SideSpec, dir: string, caPem: string, logger: Logger, progress: (m: string) => void): Promise<Side> {
  const stops: Stoppable[] = [];
  try {
    const { kind } = spec;
    const label = sideLabel(spec);
    const debounceMs = spec.debounceMs ?? HUB_DEFAULTS.debounceMs;
    const roots = rootsFor(spec.proxies);
    const shards = roots.flatMap((r) => r.shards);
    progress(`route change: ${label}: starting NATS`);
    let endpoint: NatsEndpoint;
    let pids: () => (number | undefined)[];
    if (kind === 'single') {
      const server = await startNats({ dir, security: 'secure', logger });
      stops.push(server);
      endpoint = { url: server.url, urls: server.urls, ...(server.security ? { security: server.security } : {}) };
      pids = () => [server.pid()];
    } else {
      const cluster = await startNatsCluster({ dir, servers: 3, security: 'secure', logger });
      stops.push(cluster);
      endpoint = { url: cluster.url, urls: cluster.urls, ...(cluster.security ? { security: cluster.security } : {}) };
      pids = () => cluster.servers.map((s) => s.pid());
    }
    const auth = endpoint.security?.auth;
    if (!auth) throw new Error('the route-change bench needs secure NATS');
    const seed = async (path: string): Promise<string> => (await readFile(path, 'utf8')).trim();
    const replicas = kind === 'single' ? 1 : 3;
    progress(`route change: ${label}: starting a hub (R${replicas} buckets) and ${shards.length} route sources (${roots.length} roots)`);
    const hub = await startHub(
      {
        ...HUB_DEFAULTS,
        nats: await natsClientConfig(endpoint, { role: 'hub' }),
        tokens: [{ cluster: CLUSTER, token: TOKEN }],
        signingSeed: await seed(auth.routeSigningSeed),
        agentIssuer: { seed: await seed(auth.issuerSeed), account: auth.accountPublicKey },
        identity: `bench-prop-${kind}-${spec.proxies}-${debounceMs}-${spec.pacing ?? 'back-to-back'}`,
        replicas,
        debounceMs,
        listen: { host: '127.0.0.1', port: 0 },
      },
      { logger },
    );
    stops.push(hub);
    await until(`the ${label} bench hub leads`, () => hub.isLeader());

    const bootstrap = await connectNats({ config: await natsClientConfig(endpoint, { role: 'bootstrap' }), name: 'bench-prop-bootstrap', logger });
    try {
      // As an agent registers: asked again until a hub that has read its buckets answers.
      await registerCluster({ link: bootstrap, identity: { name: CLUSTER, labels: {}, server: 'https://127.0.0.1:1', caPem }, token: TOKEN, logger, signal: AbortSignal.timeout(60_000) });
    } finally {
      await bootstrap.close();
    }

    // The simulated agent: its cluster's identity, heartbeating so the hub sees the cluster Ready.
    const agent = await connectNats({ config: await natsClientConfig(endpoint, { role: 'agent', cluster: CLUSTER }), name: 'bench-prop-agent', logger });
    stops.push({ stop: () => agent.close() });
    const beat = (): void =>
      publishMessage(agent, Subjects.heartbeat(CLUSTER), Messages.heartbeat, { schema: MESSAGE_SCHEMA_VERSION, cluster: CLUSTER, sentAt: new Date().toISOString(), apiServerReachable: true });
    beat();
    const heartbeat = setInterval(beat, HEARTBEAT_MS);
    stops.push({ stop: () => clearInterval(heartbeat) });

    const side: Side = {
      spec,
      label,
      debounceMs,
      pacing: spec.pacing ?? 'back-to-back',
      random: seededRandom(spec.proxies * 1000 + debounceMs),
      servers: kind === 'single' ? 1 : 3,
      replicas: 0,
      roots,
      shards,
      pids,
      hub,
      agent,
      versions: new Map(shards.map((s) => [s, new Map()])),
      ackedAt: new Map(shards.map((s) => [s, new Map()])),
      applied: new Progress(shards),
      acked: new Progress(shards),
      next: 0,
      stops,
      applySamples: [],
      ackSamples: [],
      cpuUs: 0,
      serverCpuUs: 0,
      reconcileSeconds: 0,
      measured: 0,
    };

    // Acknowledgements as the hub receives them: a subscriber with the hub's identity on the ack subjects.
    const operators = new Set(roots.map((r) => r.operator));
    const watcher = await connectNats({ config: await natsClientConfig(endpoint, { role: 'hub' }), name: 'bench-prop-acks', logger });
    stops.push({ stop: () => watcher.close() });
    const acks = subscribeAcks({
      link: watcher,
      logger,
      onAck: (ack) => {
        if (!operators.has(ack.operator)) return;
        const when = now();
        const seen = side.ackedAt.get(ack.shard);
        if (!seen || seen.has(ack.version)) return;
        seen.set(ack.version, when);
        for (const [change, version] of side.versions.get(ack.shard) ?? []) if (version === ack.version) side.acked.record(ack.shard, change, when);
      },
    });
    stops.push({ stop: () => acks.unsubscribe() });
    await watcher.nc.flush();

    // The proxies: one NatsRouteSource per shard, in a worker thread, each with its shard's proxy identity.
    const sources: SourcesData['benchPropSources']['sources'] = [];
    for (const root of roots) {
      for (const shard of root.shards) sources.push({ operator: root.operator, shard, nats: await natsClientConfig(endpoint, { role: 'proxy', operator: root.operator, shard }) });
    }
    const worker = new Worker(new URL(import.meta.url), { workerData: { benchPropSources: { sources, trusted: [auth.routeSigningPublicKey] } } satisfies SourcesData });
    let failure: Error | undefined;
    const ready = new Promise<void>((resolve, reject) => {
      worker.on('message', (message: SourcesMessage) => {
        if (message.type === 'table') {
          side.versions.get(message.shard)?.set(message.change, message.version);
          side.applied.record(message.shard, message.change, message.at);
          const ackedAt = side.ackedAt.get(message.shard)?.get(message.version);
          if (ackedAt !== undefined) side.acked.record(message.shard, message.change, ackedAt);
        } else if (message.type === 'ready') resolve();
        else if (message.type === 'error') reject((failure = new Error(`${label}: route sources: ${message.message}`)));
      });
      worker.on('error', (err) => reject((failure = err)));
    });
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    stops.push({
      stop: async () => {
        worker.postMessage({ type: 'stop' });
        const timer = setTimeout(() => void worker.terminate(), 10_000);
        await exited;
        clearTimeout(timer);
      },
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([ready, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${label}: route sources not connected after ${READY_MS / 1000} s`)), READY_MS)))]);
    } finally {
      clearTimeout(timer);
    }
    if (failure) throw failure;
    side.replicas = (await (await openBucket(watcher.js, Buckets.routes)).status()).replicas;
    return side;
  } catch (err) {
    for (const s of stops.reverse()) await Promise.resolve(s.stop()).catch(() => undefined);
    throw err;
  }
}

async function stopSide(side: Side): Promise<void> {
  for (const s of [...side.stops].reverse()) await Promise.resolve(s.stop()).catch(() => undefined);
}

/** One change: the report out, then every source's table and every acknowledgement in. */
async function change(side: Side): Promise<{ appliedMs: number; ackedMs: number }> {
  const n = side.next++;
  const started = now();
  publishMessage(side.agent, Subjects.report(CLUSTER), Messages.clusterReport, changeReport(n, side.roots));
  const applied = await side.applied.until(n, `${side.label}: tables`);
  const acked = await side.acked.until(n, `${side.label}: acknowledgements`);
  return { appliedMs: applied - started, ackedMs: acked - started };
}

/** The sum of the hub's reconcile-duration histogram, in seconds. */
async function reconcileSum(side: Side): Promise<number> {
  const text = await (await fetch(`${side.hub.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('ctrlmesh_hub_reconcile_duration_seconds_sum'));
  return Number(line?.split(' ').at(-1) ?? Number.NaN);
}

async function measureRound(side: Side, changes: number): Promise<void> {
  if (side.pacing === 'isolated') {
    // Each change after a quiet pause, its CPU and reconcile time read around it alone.
    for (let i = 0; i < changes; i++) {
      await new Promise((r) => setTimeout(r, quietMs(side.debounceMs, side.random)));
      await measureChanges(side, 1);
    }
    return;
  }
  await measureChanges(side, changes);
}

async function measureChanges(side: Side, changes: number): Promise<void> {
  const reconcile0 = await reconcileSum(side);
  const server0 = await serverCpuUs(side);
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < changes; i++) {
    const { appliedMs, ackedMs } = await change(side);
    side.applySamples.push(appliedMs);
    side.ackSamples.push(ackedMs);
  }
  const cpu = process.cpuUsage(cpu0);
  side.cpuUs += cpu.user + cpu.system;
  side.serverCpuUs += (await serverCpuUs(side)) - server0;
  side.reconcileSeconds += (await reconcileSum(side)) - reconcile0;
  side.measured += changes;
}

async function serverCpuUs(side: Side): Promise<number> {
  let total = 0;
  for (const pid of side.pids()) total += await processCpuUs(pid);
  return total;
}

function sideRow(side: Side): BenchRow {
  const applied = [...side.applySamples].sort((a, b) => a - b);
  const acked = [...side.ackSamples].sort((a, b) => a - b);
  return {
    case: `route change -> every proxy applied, ${side.label}, R${side.replicas}: agent report -> real hub -> ${side.shards.length} NatsRouteSources (${side.roots.length} operator${side.roots.length === 1 ? '' : 's'})`,
    servers: side.servers,
    replicas: side.replicas,
    shards: side.shards.length,
    operators: side.roots.length,
    debounceMs: side.debounceMs,
    pacing: side.pacing,
    changes: side.measured,
    p50Ms: round(percentile(applied, 0.5), 1),
    p99Ms: round(percentile(applied, 0.99), 1),
    maxMs: round(applied.at(-1) as number, 1),
    ackedP50Ms: round(percentile(acked, 0.5), 1),
    ackedP99Ms: round(percentile(acked, 0.99), 1),
    hubReconcileMsPerChange: round((side.reconcileSeconds * 1000) / side.measured, 1),
    cpuUsPerChange: Math.round(side.cpuUs / side.measured),
    serverCpuUsPerChange: Math.round(side.serverCpuUs / side.measured),
  };
}

/** The sides of one group: started together, warmed up, measured in ROUNDS rotated rounds, stopped. */
async function groupRows(
  specs: readonly SideSpec[],
  options: { dir: string; caPem: string; logger: Logger; progress: (m: string) => void; rounds?: number },
): Promise<BenchRow[]> {
  const { logger, progress, caPem } = options;
  const rounds = options.rounds ?? ROUNDS;
  const sides: Side[] = [];
  try {
    // One after another: each side's proxies connect (TLS, JWT) at once, which is enough of a storm.
    for (const spec of specs) {
      sides.push(await startSide(spec, join(options.dir, `prop-${spec.kind}-${spec.proxies}-${spec.debounceMs ?? 'default'}-${spec.pacing ?? 'back-to-back'}`), caPem, logger, progress));
    }
    for (const side of sides) {
      progress(`route change: ${side.label}: first tables, then ${WARMUP} untimed changes`);
      // The first report creates the operators: their tables, one per shard, must name exactly the expected shards.
      for (let i = 0; i <= WARMUP; i++) await change(side);
      for (const root of side.roots) {
        const planned = side.hub.status().operators.find((o) => o.operator === root.operator)?.shards.map((s) => s.name).sort() ?? [];
        if (planned.join() !== [...root.shards].sort().join()) throw new Error(`${side.label}: the hub planned shards ${planned.join(', ')} for ${root.operator}, not ${root.shards.join(', ')}`);
      }
    }
    const loads: number[] = [loadavg()[0]!];
    // Per round, each side's median: ratios between sides are taken within a round, then the median over rounds.
    const perRound: Map<Side, number>[] = [];
    for (let r = 0; r < rounds; r++) {
      progress(`route change: round ${r + 1}/${rounds} (${CHANGES_PER_ROUND} changes on each of ${sides.length} sides)`);
      const medians = new Map<Side, number>();
      for (let k = 0; k < sides.length; k++) {
        const side = sides[(r + k) % sides.length]!;
        const from = side.applySamples.length;
        await measureRound(side, CHANGES_PER_ROUND);
        medians.set(side, median(side.applySamples.slice(from)));
      }
      perRound.push(medians);
      loads.push(loadavg()[0]!);
    }
    const rows = sides.map((side) => sideRow(side));
    // A 3-server side against the 1-server side with the same proxies and debounce.
    sides.forEach((three, i) => {
      if (three.spec.kind !== 'cluster') return;
      const j = sides.findIndex(
        (s) => s.spec.kind === 'single' && s.spec.proxies === three.spec.proxies && s.debounceMs === three.debounceMs && s.pacing === three.pacing,
      );
      if (j === -1) return;
      const [one, row] = [rows[j]!, rows[i]!];
      const ratio = (key: string): number => round((row[key] as number) / (one[key] as number), 2);
      Object.assign(row, {
        threeOverOneP50: ratio('p50Ms'),
        threeOverOneP99: ratio('p99Ms'),
        // The ratio of the two sides' medians within each round, then the median over rounds.
        threeOverOneRoundMedian: round(median(perRound.map((m) => m.get(three)! / m.get(sides[j]!)!)), 2),
        threeOverOneCpu: ratio('cpuUsPerChange'),
        threeOverOneServerCpu: ratio('serverCpuUsPerChange'),
      });
    });
    loads.push(loadavg()[0]!);
    const proxies = [...new Set(specs.map((s) => s.proxies))].join(', ');
    rows.push(loadRow(`route change, ${proxies} proxies: machine load`, loads));
    return rows;
  } finally {
    progress('route change: stopping hubs, sources and servers');
    await Promise.all(sides.map((side) => stopSide(side)));
  }
}

/**
 * Runs each group of sides (ROUTE_CHANGE_GROUPS unless given) one after another: each side a secure single
 * nats-server or 3-server cluster with a real hub and one route source per proxy, ROUNDS x CHANGES_PER_ROUND route
 * changes per side in rotated order. `caPem`: a real CA for the simulated cluster's registration.
 */
export async function routeChangeRows(options: {
  dir: string;
  caPem: string;
  logger: Logger;
  progress: (m: string) => void;
  groups?: readonly (readonly SideSpec[])[];
  /** Rounds per group (ROUNDS unless given): fewer for a quick comparison. */
  rounds?: number;
  /** Each group's rows as soon as it is done. */
  onGroup?: (rows: BenchRow[]) => void;
}): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  for (const group of options.groups ?? ROUTE_CHANGE_GROUPS) {
    const done = await groupRows(group, options);
    options.onGroup?.(done);
    rows.push(...done);
  }
  return rows;
}

/**
 * Run on its own (`node dist/bench/propagation.js [proxies ...]`): the groups (those with a side of one of the given
 * proxy counts, or all), printed as a table; a throwaway CA stands in for the cluster's. BENCH_PROP_ROUNDS: fewer
 * rounds than ROUNDS, for a quick before/after.
 */
if (isMainThread && process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { createCertificateAuthority } = await import('../src/tls/index.js');
  const wanted = process.argv.slice(2).map(Number);
  const groups = ROUTE_CHANGE_GROUPS.filter((g) => wanted.length === 0 || g.some((s) => wanted.includes(s.proxies)));
  const dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-bench-prop-'));
  try {
    const ca = await createCertificateAuthority({ commonName: 'bench-prop-ca' });
    const progress = (m: string): void => void process.stderr.write(`bench: propagation: ${m}\n`);
    await routeChangeRows({
      dir,
      caPem: ca.certPem,
      logger: pino({ level: 'silent' }),
      progress,
      groups,
      ...(process.env.BENCH_PROP_ROUNDS ? { rounds: Number(process.env.BENCH_PROP_ROUNDS) } : {}),
      onGroup: (rows) => console.log(`node ${process.version}, ${new Date().toISOString()}\n${formatTable(rows)}\n`),
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
