/**
 * Route change -> every proxy applied (issue 12): the same change, end to end through a real hub, on one secure
 * nats-server (R1 buckets) and on a secure 3-server cluster (R3 buckets), both started in the same run and measured
 * in interleaved rounds. Not a benchmark of its own (main.ts skips this file): bench/hub.ts adds these rows.
 *
 * The change enters at the hub's input, as an agent would send it after a ShardingConfig edit: a ClusterReport on
 * the cluster's report subject (published with the cluster's agent identity; no API server or agent process) whose
 * root ShardingConfig's resourceSelector carries a new label value. The hub stores the report in KV, plans, and
 * publishes a new signed table for each of the root's SHARDS shards (their limits changed, no bucket moved, so no
 * handover). One NatsRouteSource per shard (the proxy's own route source, with its shard's proxy identity) receives
 * it, and acknowledges it as a proxy does once applied. Measured: from publishing the report until the last source
 * received its new table (`applied`), and until the last acknowledgement reached a subscriber on the hub's subject
 * (`acked`).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { natsClientConfig, startNats, startNatsCluster, type NatsEndpoint } from '../src/dev/index.js';
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
  requestMessage,
  subscribeAcks,
  type ClusterReport,
  type NatsLink,
  type RouteTable,
} from '../src/transport/index.js';
import { median, processCpuUs } from './bus.js';
import { percentile, round, type BenchRow } from './harness.js';

/** Shards of the bench operator, each with its own route source. */
const SHARDS = 6;
/** Rounds; each measures CHANGES_PER_ROUND changes on one side, then on the other (order alternating). */
const ROUNDS = 10;
const CHANGES_PER_ROUND = 20;
/** Untimed changes per side before the rounds. */
const WARMUP = 3;
/** The hub's debounce: short, so the figure is the path and not the wait (the default adds its 200 ms). */
const DEBOUNCE_MS = 20;
const HEARTBEAT_MS = 2_000;
/** Every wait is bounded. */
const STALL_MS = 30_000;

const CLUSTER = 'bench-prop';
const TOKEN = 'bench-prop-token';
const NAMESPACE = 'bench-prop';
const ROOT = 'prop-root';
const PREFIX = 'prop';
const OPERATOR = `${NAMESPACE}/${ROOT}`;
/** The label whose value each change sets in the root's resourceSelector, and that each table then carries. */
const MARKER = 'bench.ctrlmesh.kusionstack.io/change';
const SHARD_NAMES = Array.from({ length: SHARDS }, (_, i) => `${CLUSTER}/${PREFIX}-${i + 1}-normal`);

/** The report an agent would send after the root's resourceSelector was edited to carry `change`. */
function changeReport(change: number): ClusterReport {
  return {
    schema: MESSAGE_SCHEMA_VERSION,
    cluster: CLUSTER,
    sentAt: new Date().toISOString(),
    hash: { algorithm: 'kusionstack', bucketCount: 32, labels: { hash: 'ctrlmesh.kusionstack.io/sharding-hash', namespace: 'ctrlmesh.kusionstack.io/namespace', control: 'ctrlmesh.kusionstack.io/control' } },
    shardingConfigs: [
      {
        namespace: NAMESPACE,
        name: ROOT,
        generation: change + 1,
        manifest: {
          apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1',
          kind: 'ShardingConfig',
          metadata: { name: ROOT, namespace: NAMESPACE },
          spec: {
            root: {
              prefix: PREFIX,
              targetStatefulSet: 'bench-operator',
              auto: { shardingSize: SHARDS, everyShardReplicas: 1 },
              resourceSelector: [{ relateResources: [{ apiGroups: [''], resources: ['configmaps'] }], selector: { matchLabels: { [MARKER]: String(change) } } }],
              clusters: {},
            },
            controller: { leaderElectionName: 'bench-operator-leader', multicluster: true },
            selector: { matchLabels: { app: 'bench-operator' } },
          },
        },
      },
    ],
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

/** The latest change each shard has reached, and waiters for all of them to reach one. */
class Progress {
  private readonly at = new Map<string, { change: number; when: number }>();
  private waiters: { change: number; resolve: (when: number) => void }[] = [];

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
    for (const shard of SHARD_NAMES) {
      const known = this.at.get(shard);
      if (!known || known.change < change) return undefined;
      last = Math.max(last, known.when);
    }
    return last;
  }

  until(change: number, what: string): Promise<number> {
    const now = this.lastReached(change);
    if (now !== undefined) return Promise.resolve(now);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const behind = SHARD_NAMES.filter((s) => (this.at.get(s)?.change ?? -1) < change);
        reject(new Error(`${what}: change ${change} not reached by ${behind.join(', ')} after ${STALL_MS / 1000} s`));
      }, STALL_MS);
      this.waiters.push({ change, resolve: (when) => (clearTimeout(timer), resolve(when)) });
    });
  }
}

interface Stoppable {
  stop(): Promise<void> | void;
}

interface Side {
  label: string;
  servers: number;
  replicas: number;
  pids: () => (number | undefined)[];
  hub: HubHandle;
  agent: NatsLink;
  /** Version of each shard's table per change: the acks name versions, the tables carry changes. */
  versions: Map<string, Map<number, number>>;
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

async function startSide(kind: 'single' | 'cluster', dir: string, caPem: string, logger: Logger, progress: (m: string) => void): Promise<Side> {
  const stops: Stoppable[] = [];
  try {
    const label = kind === 'single' ? '1 server' : '3-server cluster';
    progress(`route change: starting the ${label}`);
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
    progress(`route change: ${label}: starting a hub (R${replicas} buckets) and ${SHARDS} route sources`);
    const hub = await startHub(
      {
        ...HUB_DEFAULTS,
        nats: await natsClientConfig(endpoint, { role: 'hub' }),
        tokens: [{ cluster: CLUSTER, token: TOKEN }],
        signingSeed: await seed(auth.routeSigningSeed),
        agentIssuer: { seed: await seed(auth.issuerSeed), account: auth.accountPublicKey },
        identity: `bench-prop-${kind}`,
        replicas,
        debounceMs: DEBOUNCE_MS,
        listen: { host: '127.0.0.1', port: 0 },
      },
      { logger },
    );
    stops.push(hub);
    await until(`the ${label} bench hub leads`, () => hub.isLeader());

    const bootstrap = await connectNats({ config: await natsClientConfig(endpoint, { role: 'bootstrap' }), name: 'bench-prop-bootstrap', logger });
    try {
      const reply = await requestMessage({
        link: bootstrap,
        subject: Subjects.register,
        request: Messages.registerRequest,
        reply: Messages.registerReply,
        value: { schema: MESSAGE_SCHEMA_VERSION, token: TOKEN, cluster: { name: CLUSTER, labels: {}, server: 'https://127.0.0.1:1', caPem } },
        timeoutMs: 10_000,
        logger,
      });
      if (!reply.ok) throw new Error(`the ${label} bench hub refused the registration: ${reply.error ?? ''}`);
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
      label,
      servers: kind === 'single' ? 1 : 3,
      replicas: 0,
      pids,
      hub,
      agent,
      versions: new Map(SHARD_NAMES.map((s) => [s, new Map()])),
      applied: new Progress(),
      acked: new Progress(),
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
    const watcher = await connectNats({ config: await natsClientConfig(endpoint, { role: 'hub' }), name: 'bench-prop-acks', logger });
    stops.push({ stop: () => watcher.close() });
    const acks = subscribeAcks({
      link: watcher,
      logger,
      onAck: (ack) => {
        if (ack.operator !== OPERATOR) return;
        const when = performance.now();
        for (const [change, version] of side.versions.get(ack.shard) ?? []) if (version === ack.version) side.acked.record(ack.shard, change, when);
      },
    });
    stops.push({ stop: () => acks.unsubscribe() });
    await watcher.nc.flush();

    for (const shard of SHARD_NAMES) {
      const source = new NatsRouteSource({
        nats: await natsClientConfig(endpoint, { role: 'proxy', operator: OPERATOR, shard }),
        trusted: [auth.routeSigningPublicKey],
        operator: OPERATOR,
        shard,
        from: `bench-${shard}`,
        logger,
      });
      stops.push(source);
      await source.start({
        onTable: (table) => {
          const when = performance.now();
          const change = changeOf(table);
          side.versions.get(shard)?.set(change, table.version);
          side.applied.record(shard, change, when);
          void source.acknowledge(table);
        },
        onContact: () => undefined,
        onRenewal: () => undefined,
      });
    }
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
  const started = performance.now();
  publishMessage(side.agent, Subjects.report(CLUSTER), Messages.clusterReport, changeReport(n));
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
    case: `route change -> every proxy applied, ${side.label} (R${side.replicas}): agent report -> real hub (debounce ${DEBOUNCE_MS} ms) -> ${SHARDS} NatsRouteSources`,
    servers: side.servers,
    replicas: side.replicas,
    shards: SHARDS,
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

/**
 * Starts a secure single nats-server and a secure 3-server cluster side by side, each with a real hub and SHARDS
 * route sources, measures ROUNDS x CHANGES_PER_ROUND route changes on each (order alternating per round), and
 * stops everything. `caPem`: a real CA for the simulated cluster's registration.
 */
export async function routeChangeRows(options: { dir: string; caPem: string; logger: Logger; progress: (m: string) => void }): Promise<BenchRow[]> {
  const { logger, progress, caPem } = options;
  const started = await Promise.allSettled([
    startSide('single', join(options.dir, 'prop-single'), caPem, logger, progress),
    startSide('cluster', join(options.dir, 'prop-cluster'), caPem, logger, progress),
  ]);
  const sides = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  try {
    const failed = started.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
    const [single, cluster] = sides as [Side, Side];
    for (const side of sides) {
      progress(`route change: ${side.label}: first tables, then ${WARMUP} untimed changes`);
      // The first report creates the operator: its tables, one per shard, must name exactly the expected shards.
      for (let i = 0; i <= WARMUP; i++) await change(side);
      const planned = side.hub.status().operators.find((o) => o.operator === OPERATOR)?.shards.map((s) => s.name).sort() ?? [];
      if (planned.join() !== [...SHARD_NAMES].sort().join()) throw new Error(`${side.label}: the hub planned shards ${planned.join(', ')}, not ${SHARD_NAMES.join(', ')}`);
    }
    const perRound: [number, number][] = [];
    for (let r = 0; r < ROUNDS; r++) {
      progress(`route change: round ${r + 1}/${ROUNDS} (${CHANGES_PER_ROUND} changes per side)`);
      const medians: Record<string, number> = {};
      for (const side of r % 2 === 0 ? [single, cluster] : [cluster, single]) {
        const from = side.applySamples.length;
        await measureRound(side, CHANGES_PER_ROUND);
        medians[side.label] = median(side.applySamples.slice(from));
      }
      perRound.push([medians[single.label]!, medians[cluster.label]!]);
    }
    const one = sideRow(single);
    const three = sideRow(cluster);
    const ratio = (key: string): number => round((three[key] as number) / (one[key] as number), 2);
    return [
      one,
      {
        ...three,
        threeOverOneP50: ratio('p50Ms'),
        threeOverOneP99: ratio('p99Ms'),
        // The ratio of the two sides' medians within each round, then the median over rounds.
        threeOverOneRoundMedian: round(median(perRound.map(([a, b]) => b / a)), 2),
        threeOverOneCpu: ratio('cpuUsPerChange'),
        threeOverOneServerCpu: ratio('serverCpuUsPerChange'),
      },
    ];
  } finally {
    progress('route change: stopping hubs, sources and servers');
    await Promise.all(sides.map((side) => stopSide(side)));
  }
}
