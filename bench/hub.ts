import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { pino } from 'pino';
import { AGENT_DEFAULTS, startAgent } from '../src/agent/index.js';
import { readFileSync } from 'node:fs';
import { freePort, natsClientConfig, startTestbed, type NatsEndpoint, type Testbed } from '../src/dev/index.js';
import { registerCluster } from '../src/agent/register.js';
import { HUB_DEFAULTS, startHub, type HubOptions } from '../src/hub/index.js';
import { hubCommandArgs } from '../src/transport/command-lines.js';
import {
  MESSAGE_SCHEMA_VERSION,
  Messages,
  Subjects,
  connectNats,
  publishMessage,
  watchRouteTable,
} from '../src/transport/index.js';
import { busSecurityRows, simulatedReport } from './bus.js';
import { routeChangeRows } from './propagation.js';
import { percentile, round, seededRandom, type Benchmark, type BenchRow } from './harness.js';

const logger = pino({ level: 'silent' });

/** The hub's side of a bed's NATS: its connection, signing key and agent issuer. */
async function hubSide(nats: NatsEndpoint, clusters: string[]): Promise<Pick<HubOptions, 'nats' | 'tokens' | 'signingSeed' | 'agentIssuer'>> {
  const auth = nats.security?.auth;
  if (!auth) throw new Error('the bench bed runs NATS without security');
  const seed = (path: string): string => readFileSync(path, 'utf8').trim();
  return {
    nats: await natsClientConfig(nats, { role: 'hub' }),
    tokens: clusters.map((cluster) => ({ cluster, token: TOKEN })),
    signingSeed: seed(auth.routeSigningSeed),
    agentIssuer: { seed: seed(auth.issuerSeed), account: auth.accountPublicKey },
  };
}
const TOKEN = 'bench-token';
const GROUP = 'ctrlmesh.kusionstack.io';
const NS = 'bench-hub';
const CHANGES = 100;
const SIMULATED_CLUSTERS = 500;
const HEARTBEAT_MS = 2_000;
const LOAD_WINDOW_MS = 30_000;

function handConfig(bucket: number): { apiVersion: string; kind: string; metadata: object; spec: object } {
  return {
    apiVersion: `${GROUP}/v1alpha1`,
    kind: 'ShardingConfig',
    metadata: { name: 'bench', namespace: NS },
    spec: {
      selector: { matchLabels: { app: 'bench' } },
      limits: [
        {
          relateResources: [{ apiGroups: [''], resources: ['configmaps'] }],
          selector: { matchExpressions: [{ key: 'ctrlmesh.kusionstack.io/sharding-hash', operator: 'In', values: [String(bucket)] }] },
        },
      ],
    },
  };
}

/**
 * How the changes of `changeToRouteTable` follow each other: `back-to-back`, the next as soon as the table of the
 * previous is in KV (a burst: each change lands in the window the previous one opened, so it waits for the trailing
 * run); `isolated`, the next after a quiet pause of 1-1.5 s (seeded), so each is the first change after a quiet period,
 * as an operator's edit of a ShardingConfig is.
 */
type ChangePacing = 'back-to-back' | 'isolated';
const ISOLATED_CHANGES = 200;
const QUIET_MS = [1_000, 1_500] as const;

/** Wall time from writing a ShardingConfig change to the API server until its route table is in KV. */
async function changeToRouteTable(bed: Testbed, debounceMs: number, pacing: ChangePacing, progress: (m: string) => void): Promise<BenchRow> {
  const changes = pacing === 'isolated' ? ISOLATED_CHANGES : CHANGES;
  const random = seededRandom(17);
  const info = bed.info.clusters[0];
  if (!info) throw new Error('the bench bed has no cluster');
  const kc = new KubeConfig();
  kc.loadFromFile(info.kubeconfigPath);
  const side = await hubSide(bed.info.nats, ['bench']);
  const hub = await startHub({ ...HUB_DEFAULTS, ...side, identity: 'bench-hub', debounceMs, listen: { host: '127.0.0.1', port: 0 } }, { logger });
  const nats = await natsClientConfig(bed.info.nats, { role: 'bootstrap' });
  const agent = await startAgent(
    { ...AGENT_DEFAULTS, cluster: 'bench', clusterLabels: {}, nats, token: TOKEN, hash: { algorithm: 'kusionstack' }, debounceMs, listen: { host: '127.0.0.1', port: 0 } },
    { kc, logger },
  );
  const link = await connectNats({ config: await natsClientConfig(bed.info.nats, { role: 'proxy', operator: `${NS}/bench`, shard: 'bench/bench' }), name: 'bench-watch', logger });
  const api = kc.makeApiClient(CustomObjectsApi);
  const params = { group: GROUP, version: 'v1alpha1', namespace: NS, plural: 'shardingconfigs', name: 'bench' };
  let waiting: { bucket: number; resolve: () => void } | undefined;
  const watch = watchRouteTable({
    link,
    operator: `${NS}/bench`,
    shard: 'bench/bench',
    logger,
    trusted: [bed.info.nats.security?.auth.routeSigningPublicKey ?? ''],
    onTable: (table) => {
      if (waiting && table.clusters[0]?.buckets.join() === String(waiting.bucket)) waiting.resolve();
    },
  });
  const latencies: number[] = [];
  try {
    for (let i = 0; i <= changes; i++) {
      if (pacing === 'isolated') await new Promise((r) => setTimeout(r, QUIET_MS[0] + random() * (QUIET_MS[1] - QUIET_MS[0])));
      const bucket = i % 32;
      const seen = new Promise<void>((resolve) => (waiting = { bucket, resolve }));
      const started = performance.now();
      // A merge patch of the spec once the config exists (an earlier row made it): the agent writes the status
      // meanwhile, so a replace would conflict.
      const patch = () => api.patchNamespacedCustomObject({ ...params, body: { spec: handConfig(bucket).spec } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
      if (i === 0) {
        await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NS } } }).catch(() => undefined);
        await api.createNamespacedCustomObject({ ...params, body: handConfig(bucket) }).catch(patch);
      } else {
        await patch();
      }
      await seen;
      // The first round includes CRD discovery and the first route table: not a change.
      if (i > 0) latencies.push(performance.now() - started);
      if (i % 25 === 0) progress(`debounce ${debounceMs} ms, ${pacing}: ${i}/${changes} changes`);
    }
  } finally {
    watch.stop();
    await link.close();
    await agent.stop();
    await hub.stop();
  }
  latencies.sort((a, b) => a - b);
  return {
    case: `config change -> route table in KV (debounce ${debounceMs} ms in agent and hub${debounceMs === HUB_DEFAULTS.debounceMs ? ', the default' : ''}; ${pacing === 'isolated' ? `changes ${QUIET_MS[0] / 1000}-${QUIET_MS[1] / 1000} s apart` : 'back-to-back changes'})`,
    changes: latencies.length,
    p50Ms: round(percentile(latencies, 0.5), 1),
    p99Ms: round(percentile(latencies, 0.99), 1),
    maxMs: round(latencies.at(-1) as number, 1),
  };
}

/** Wall time from the leader's crash (no lease release) until the standby leads, with the default lease. */
async function failover(nats: NatsEndpoint, progress: (m: string) => void): Promise<BenchRow> {
  const options = { ...HUB_DEFAULTS, ...(await hubSide(nats, [])), listen: { host: '127.0.0.1', port: 0 } };
  const times: number[] = [];
  for (let i = 0; i < 3; i++) {
    progress(`failover ${i + 1}/3`);
    const first = await startHub({ ...options, identity: `fo-${i}-a` }, { logger });
    while (!first.isLeader()) await new Promise((r) => setTimeout(r, 20));
    const second = await startHub({ ...options, identity: `fo-${i}-b` }, { logger });
    const crashed = performance.now();
    await first.stop({ releaseLease: false });
    while (!second.isLeader()) await new Promise((r) => setTimeout(r, 20));
    times.push(performance.now() - crashed);
    await second.stop();
  }
  times.sort((a, b) => a - b);
  return {
    case: `hub leader crash -> standby leads (lease TTL ${HUB_DEFAULTS.leaseTtlMs / 1000} s, renew ${HUB_DEFAULTS.leaseRenewMs / 1000} s; 3 runs)`,
    p50Ms: round(percentile(times, 0.5), 0),
    maxMs: round(times.at(-1) as number, 0),
  };
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
  return Number(line?.split(' ').at(-1));
}

/** A hub process (the real CLI) serving 500 simulated clusters that heartbeat every 2 s: its CPU and memory. */
async function heartbeatLoad(bed: Testbed, dir: string, progress: (m: string) => void): Promise<BenchRow> {
  const auth = bed.info.nats.security?.auth;
  const caFile = bed.info.nats.security?.caFile;
  if (!auth || !caFile) throw new Error('the bench bed runs NATS without security');
  const names = Array.from({ length: SIMULATED_CLUSTERS }, (_, i) => `sim-${String(i).padStart(3, '0')}`);
  const tokenFile = join(dir, 'tokens');
  await writeFile(tokenFile, names.map((name) => `${name} ${TOKEN}\n`).join(''));
  const caPem = bed.info.clusters[0]?.caPem ?? '';
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    process.execPath,
    [
      join(import.meta.dirname, '..', 'src', 'cli', 'main.js'),
      ...hubCommandArgs({
        nats: [bed.info.nats.url],
        natsCa: caFile,
        natsCreds: auth.hubCreds,
        signingKey: auth.routeSigningSeed,
        tokenFile,
        listen: `127.0.0.1:${port}`,
        identity: 'bench-load',
      }),
      '--log-level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'inherit'] },
  );
  // The simulated clusters speak with the hub's identity: one connection may then publish for all 500.
  const link = await connectNats({ config: await natsClientConfig(bed.info.nats, { role: 'hub' }), name: 'bench-clusters', logger });
  let timer: NodeJS.Timeout | undefined;
  try {
    for (let i = 0; ; i++) {
      const status = await fetch(`${url}/status`).then((r) => r.json() as Promise<{ leader: boolean }>, () => undefined);
      if (status?.leader) break;
      if (i > 300) throw new Error('the hub process did not become leader');
      await new Promise((r) => setTimeout(r, 100));
    }
    progress(`registering ${names.length} simulated clusters`);
    for (const name of names) {
      await registerCluster({ link, identity: { name, labels: {}, server: 'https://127.0.0.1:1', caPem }, token: TOKEN, logger, signal: AbortSignal.timeout(60_000) });
    }
    const now = new Date();
    for (const name of names) publishMessage(link, Subjects.report(name), Messages.clusterReport, simulatedReport(name, now));
    let next = 0;
    timer = setInterval(() => {
      const name = names[next++ % names.length] as string;
      publishMessage(link, Subjects.heartbeat(name), Messages.heartbeat, {
        schema: MESSAGE_SCHEMA_VERSION,
        cluster: name,
        sentAt: new Date().toISOString(),
        apiServerReachable: true,
      });
    }, HEARTBEAT_MS / names.length);
    progress('warming up for 5 s');
    await new Promise((r) => setTimeout(r, 5_000));
    const cpu0 = await metric(url, 'process_cpu_seconds_total');
    const t0 = performance.now();
    progress(`measuring the hub process for ${LOAD_WINDOW_MS / 1000} s`);
    await new Promise((r) => setTimeout(r, LOAD_WINDOW_MS));
    const cpu1 = await metric(url, 'process_cpu_seconds_total');
    const seconds = (performance.now() - t0) / 1000;
    const rss = await metric(url, 'process_resident_memory_bytes');
    const heap = await metric(url, 'nodejs_heap_size_used_bytes');
    const status = (await (await fetch(`${url}/status`)).json()) as { clusters: { health: string }[] };
    return {
      case: `hub process, ${SIMULATED_CLUSTERS} simulated clusters heartbeating every ${HEARTBEAT_MS / 1000} s`,
      heartbeatsPerSec: Math.round((SIMULATED_CLUSTERS * 1000) / HEARTBEAT_MS),
      readyClusters: status.clusters.filter((c) => c.health === 'Ready').length,
      cpuPercentOfOneCore: round(((cpu1 - cpu0) / seconds) * 100, 1),
      rssMiB: round(rss / 2 ** 20, 1),
      heapUsedMiB: round(heap / 2 ** 20, 1),
    };
  } finally {
    clearInterval(timer);
    await link.close();
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
}

const benchmark: Benchmark = {
  name: 'hub',
  description:
    'heartbeat, report and route-table throughput on an open and a secure (TLS + JWT, an identity per role) NATS side by side, ' +
    'with secure/open ratios; route change -> every proxy applied (p50/p99, real hub, 6 route sources) on a 3-server NATS cluster (R3) against one server (R1) in the same run; ' +
    `config change to route table (p50/p99 over ${ISOLATED_CHANGES} isolated changes, and over ${CHANGES} back-to-back, real API server + agent + hub + NATS); leader failover; hub CPU and memory with ${SIMULATED_CLUSTERS} simulated clusters`,
  run: async ({ progress }) => {
    const dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-bench-hub-'));
    const bed = await startTestbed({ clusters: 1, dir, onProgress: progress });
    try {
      const rows: BenchRow[] = [];
      // BENCH_HUB_ONLY=config-change runs only the config change -> route table rows.
      const all = process.env.BENCH_HUB_ONLY !== 'config-change';
      if (all) rows.push(...(await busSecurityRows({ dir, caPem: bed.info.clusters[0]?.caPem ?? '', logger, progress })));
      if (all) rows.push(...(await routeChangeRows({ dir, caPem: bed.info.clusters[0]?.caPem ?? '', logger, progress })));
      rows.push(await changeToRouteTable(bed, HUB_DEFAULTS.debounceMs, 'isolated', progress));
      rows.push(await changeToRouteTable(bed, HUB_DEFAULTS.debounceMs, 'back-to-back', progress));
      rows.push(await changeToRouteTable(bed, 20, 'back-to-back', progress));
      if (all) rows.push(await failover(bed.info.nats, progress));
      if (all) rows.push(await heartbeatLoad(bed, dir, progress));
      return rows;
    } finally {
      await bed.down();
      await rm(dir, { recursive: true, force: true });
    }
  },
};
export default benchmark;
