import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Pool } from 'undici';
import { freePort, resolveTool, startApiServer, startEtcd, type ApiServerHandle, type EtcdHandle } from '../src/dev/index.js';
import { ClusterShardView, decide, isRefusal, parseApiRequest } from '../src/proxy/index.js';
import { bucketOf } from '../src/sharding/index.js';
import type { RouteTable } from '../src/transport/index.js';
import CircuitBreaker from 'opossum';
import { benchRouteTable, stopBenchBed } from './bench-bed.js';
import { median } from './bus.js';
import { cpuNs, loadRow, percentile, round, timePerOp, waitForLine, type Benchmark, type BenchRow } from './harness.js';
import { shardSelectionRows } from './shard-selection.js';

/** dist/bench/proxy.js -> dist/src/cli/main.js (the built CLI, run as the sidecar would be). */
const HERE = fileURLToPath(new URL('.', import.meta.url));
const CLI = join(HERE, '..', 'src', 'cli', 'main.js');
const GC_PROBE = join(HERE, 'probes', 'gc-memory.js');
const HASH_LABEL = 'ctrlmesh.kusionstack.io/shard-hash';
const NAMESPACE = 'bench';
const OBJECTS = 100;
/** Each round measures every target once per verb, in a rotated order; figures are medians over rounds. */
const ROUNDS = 7;
const LATENCY_REQUESTS = 300;
const THROUGHPUT_REQUESTS = 1000;
const CONCURRENCY = 16;
const WATCHES = 200;
const WATCH_UPDATES = 400;

interface Target {
  name: string;
  pool: Pool;
  /** The serving process, for its CPU time per request (none for direct calls). */
  pid?: number;
}

/** CPU ms (user + system) a process has used so far, from /proc (clock ticks of 10 ms). */
async function processCpuMs(pid: number | undefined): Promise<number> {
  if (pid === undefined) return 0;
  const fields = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

async function call(target: Target, path: string): Promise<void> {
  const res = await target.pool.request({ method: 'GET', path });
  await res.body.dump({ limit: Infinity });
  if (res.statusCode !== 200) throw new Error(`${target.name} ${path}: HTTP ${res.statusCode}`);
}

/** Sequential requests (after 30 untimed): wall-clock latency per request in ms, sorted. */
async function latencies(target: Target, path: string, count: number): Promise<number[]> {
  for (let i = 0; i < 30; i++) await call(target, path);
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint();
    await call(target, path);
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  return times.sort((a, b) => a - b);
}

/** `count` requests with CONCURRENCY in flight: requests per second. */
async function throughput(target: Target, path: string, count: number): Promise<number> {
  let next = 0;
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next++ < count) await call(target, path);
    }),
  );
  return count / (Number(process.hrtime.bigint() - start) / 1e9);
}

/** Resident and heap memory of the ctrlmesh proxy after a forced GC (bench/probes/gc-memory.ts answers SIGUSR2). */
async function proxyMemory(child: ChildProcess): Promise<{ rss: number; heap: number }> {
  const line = new Promise<string>((resolve) => {
    let seen = '';
    const onData = (chunk: Buffer): void => {
      seen += chunk.toString();
      const match = /gc-memory (\{.*\})\n/.exec(seen);
      if (!match) return;
      child.stdout?.off('data', onData);
      resolve(match[1]!);
    };
    child.stdout?.on('data', onData);
  });
  child.kill('SIGUSR2');
  const reading = JSON.parse(await line) as { rss: number; heap: number; forced: boolean };
  if (!reading.forced) throw new Error('the proxy was started without --expose-gc: memory would include garbage');
  return reading;
}

/** Opens `count` watches through `url`; returns their closer once each has its response head. */
async function openWatches(url: string, count: number): Promise<() => void> {
  const controller = new AbortController();
  await Promise.all(
    Array.from({ length: count }, async () => {
      const res = await fetch(`${url}/api/v1/namespaces/${NAMESPACE}/configmaps?watch=true&allowWatchBookmarks=true`, { signal: controller.signal });
      void (res.body as ReadableStream<Uint8Array>).pipeTo(new WritableStream(), { signal: controller.signal }).catch(() => undefined);
    }),
  );
  return () => controller.abort();
}

/** Watch events per second seen through `url` while the API server takes WATCH_UPDATES updates (8 writers). */
async function watchRate(url: string, admin: Target): Promise<{ events: number; perSecond: number }> {
  const controller = new AbortController();
  const res = await fetch(`${url}/api/v1/namespaces/${NAMESPACE}/configmaps?watch=true`, { signal: controller.signal });
  let events = 0;
  let first = 0n;
  let last = 0n;
  const reading = (async () => {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      for (const byte of chunk) {
        if (byte !== 0x0a) continue;
        events++;
        last = process.hrtime.bigint();
        if (first === 0n) first = last;
      }
      if (events >= WATCH_UPDATES) return;
    }
  })().catch(() => undefined);
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < WATCH_UPDATES) {
        const i = next++;
        const r = await admin.pool.request({
          method: 'PATCH',
          path: `/api/v1/namespaces/${NAMESPACE}/configmaps/cm-${i % OBJECTS}`,
          headers: { 'content-type': 'application/merge-patch+json' },
          body: JSON.stringify({ data: { n: String(i) } }),
        });
        await r.body.dump();
      }
    }),
  );
  await Promise.race([reading, new Promise((r) => setTimeout(r, 10_000))]);
  controller.abort();
  const seconds = Number(last - first) / 1e9;
  return { events, perSecond: seconds > 0 ? Math.round((events - 1) / seconds) : 0 };
}

function routeTable(server: ApiServerHandle, bucket: number): RouteTable {
  return benchRouteTable(server, { hashAlgorithm: 'kusionstack', hashLabel: HASH_LABEL, route: { buckets: [bucket] } });
}

/**
 * CPU cost of the proxy's own per-request logic, without I/O: parse the request as the API server will read it
 * (decode, classify, canonical path and query), decide, merge the selector, serialize the query forwarded.
 */
function decisionRows(server: ApiServerHandle, bucket: number): BenchRow[] {
  const table = routeTable(server, bucket);
  const view = new ClusterShardView({ table, route: table.clusters[0]!, fenced: false });
  const judge = (target: string): string => {
    const parsed = parseApiRequest('GET', target);
    if (isRefusal(parsed) || parsed.info.kind !== 'resource') throw new Error(`bench request refused: ${target}`);
    const decision = decide(parsed.info, view, 'bench-0');
    if (decision.kind === 'forward' && decision.sharded) {
      parsed.query.set('labelSelector', view.selectorWith(parsed.info.group, parsed.info.resource, parsed.query.get('labelSelector')));
    }
    return parsed.query.toString();
  };
  return [
    { case: 'request parse only, LIST', ...timePerOp(() => parseApiRequest('GET', `/api/v1/namespaces/${NAMESPACE}/configmaps?labelSelector=app%3Dbench&limit=500`)) },
    { case: 'request parse only, GET', ...timePerOp(() => parseApiRequest('GET', `/api/v1/namespaces/${NAMESPACE}/configmaps/cm-1`)) },
    { case: 'decision path, LIST (parse, decide, merge selector)', ...timePerOp(() => judge(`/api/v1/namespaces/${NAMESPACE}/configmaps?labelSelector=app%3Dbench&limit=500`)) },
    { case: 'decision path, GET (parse, decide)', ...timePerOp(() => judge(`/api/v1/namespaces/${NAMESPACE}/configmaps/cm-1`)) },
  ];
}

/** CPU ns an opossum fire adds around a call that resolves at once (the breaker's share of each request). */
async function breakerRow(): Promise<BenchRow> {
  const noop = (): Promise<void> => Promise.resolve();
  const breaker = new CircuitBreaker((run: () => Promise<void>) => run(), { timeout: false, volumeThreshold: 5, errorThresholdPercentage: 50 });
  const runs = 200_000;
  const timed = async (call: () => Promise<void>): Promise<number> => {
    for (let i = 0; i < 10_000; i++) await call();
    const start = cpuNs();
    for (let i = 0; i < runs; i++) await call();
    return (cpuNs() - start) / runs;
  };
  const bare = await timed(noop);
  const fired = await timed(() => breaker.fire(noop));
  breaker.shutdown();
  return { case: 'opossum fire overhead (ns per call)', nsPerOp: round(fired - bare, 1) };
}

/** Direct, kubectl proxy and ctrlmesh proxy on one kube-apiserver of the default version. */
async function proxyRows(progress: (message: string) => void): Promise<BenchRow[]> {
  const dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-bench-proxy-'));
  const children: ChildProcess[] = [];
  const pools: Pool[] = [];
  let etcd: EtcdHandle | undefined;
  let server: ApiServerHandle | undefined;
  try {
    progress('starting etcd and a kube-apiserver');
    etcd = await startEtcd({ dir: join(dir, 'etcd') });
    server = await startApiServer({ etcd, name: 'bench', dir: join(dir, 'bench') });
    const tls = { ca: server.caPem, cert: server.clientCertPem, key: server.clientKeyPem, rejectUnauthorized: true };
    const direct: Target = { name: 'direct', pool: new Pool(server.server, { connections: CONCURRENCY, connect: tls }) };
    pools.push(direct.pool);
    const bucket = bucketOf(NAMESPACE, { algorithm: 'kusionstack', bucketCount: 32 });
    const labels = { [HASH_LABEL]: String(bucket) };
    const create = async (path: string, object: unknown): Promise<void> => {
      const res = await direct.pool.request({ method: 'POST', path, headers: { 'content-type': 'application/json' }, body: JSON.stringify(object) });
      await res.body.dump();
    };
    progress(`creating namespace ${NAMESPACE} and ${OBJECTS} ConfigMaps`);
    await create('/api/v1/namespaces', { metadata: { name: NAMESPACE, labels } });
    for (let i = 0; i < OBJECTS; i++) {
      await create(`/api/v1/namespaces/${NAMESPACE}/configmaps`, { metadata: { name: `cm-${i}`, labels: { ...labels, app: 'bench' } }, data: { i: String(i) } });
    }

    progress('starting kubectl proxy');
    const kubectl = await resolveTool('kubectl', { onProgress: progress });
    const kubectlPort = await freePort();
    const kubectlProxy = spawn(kubectl.path, ['proxy', `--port=${kubectlPort}`, '--address=127.0.0.1', `--kubeconfig=${server.kubeconfigPath}`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(kubectlProxy);
    await waitForLine(kubectlProxy, /Starting to serve on/);

    progress('starting ctrlmesh proxy (built CLI)');
    await writeFile(join(dir, 'table.json'), JSON.stringify(routeTable(server, bucket)));
    const startCtrlmesh = async (cli: string, name: string): Promise<{ child: ChildProcess; apiUrl: string }> => {
      const [apiPort, opsPort] = [await freePort(), await freePort()];
      const child = spawn(
        process.execPath,
        [
          '--expose-gc', '--import', pathToFileURL(GC_PROBE).href,
          // BENCH_PROXY_CPU_PROF=<dir>: a CPU profile of the proxy over the whole run, written when it stops.
          ...(process.env.BENCH_PROXY_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROXY_CPU_PROF}`] : []),
          cli, 'proxy', '--route-table', join(dir, 'table.json'), '--credentials', server!.kubeconfigPath, '--store', join(dir, `store-${name}.json`),
          '--listen', `127.0.0.1:${apiPort}`, '--ops-listen', `127.0.0.1:${opsPort}`, '--log-level', 'warn',
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      children.push(child);
      await waitForLine(child, /proxy listening on/);
      return { child, apiUrl: `http://127.0.0.1:${apiPort}` };
    };
    const { child: ctrlmesh, apiUrl } = await startCtrlmesh(CLI, 'current');
    // BENCH_PROXY_BASELINE=<another checkout's dist/src/cli/main.js>: that build runs beside this one, in the same rounds.
    const baselineCli = process.env.BENCH_PROXY_BASELINE;
    const baseline = baselineCli ? await startCtrlmesh(baselineCli, 'baseline') : undefined;

    const targets: Target[] = [
      direct,
      { name: 'kubectl proxy', pool: new Pool(`http://127.0.0.1:${kubectlPort}`, { connections: CONCURRENCY }), pid: kubectlProxy.pid },
      { name: 'ctrlmesh proxy', pool: new Pool(apiUrl, { connections: CONCURRENCY }), pid: ctrlmesh.pid },
      ...(baseline ? [{ name: 'ctrlmesh proxy (baseline build)', pool: new Pool(baseline.apiUrl, { connections: CONCURRENCY }), pid: baseline.child.pid }] : []),
    ];
    pools.push(...targets.slice(1).map((t) => t.pool));
    const paths = { GET: `/api/v1/namespaces/${NAMESPACE}/configmaps/cm-1`, LIST: `/api/v1/namespaces/${NAMESPACE}/configmaps?labelSelector=app%3Dbench` };
    const rows: BenchRow[] = [];
    const loads: number[] = [loadavg()[0]!];
    for (const [verb, path] of Object.entries(paths)) {
      // Per target: one { p50, p99, rps } per round. Targets take turns within a round (order rotated each
      // round), so a burst of other work on the machine lands on all three rather than on one.
      const perRound = targets.map(() => [] as { p50: number; p99: number; rps: number; cpuUsPerRequest: number }[]);
      for (let r = 0; r < ROUNDS; r++) {
        progress(`${verb} round ${r + 1}/${ROUNDS}: each target ${LATENCY_REQUESTS} sequential, then ${THROUGHPUT_REQUESTS} with ${CONCURRENCY} in flight`);
        for (let k = 0; k < targets.length; k++) {
          const t = (r + k) % targets.length;
          const cpuBefore = await processCpuMs(targets[t]!.pid);
          const times = await latencies(targets[t]!, path, LATENCY_REQUESTS);
          const rps = await throughput(targets[t]!, path, THROUGHPUT_REQUESTS);
          const cpuUsPerRequest = ((await processCpuMs(targets[t]!.pid)) - cpuBefore) * 1000 / (LATENCY_REQUESTS + THROUGHPUT_REQUESTS);
          perRound[t]!.push({ p50: percentile(times, 0.5), p99: percentile(times, 0.99), rps, cpuUsPerRequest });
        }
        loads.push(loadavg()[0]!);
      }
      const [base, kubectlRuns] = [perRound[0]!, perRound[1]!];
      // Added latency and ratios are taken within each round (same conditions), then the median over rounds.
      const over = (runs: typeof base, f: (run: (typeof base)[number], r: number) => number): number => median(runs.map(f));
      targets.forEach((target, t) => {
        const runs = perRound[t]!;
        rows.push({
          case: `${verb} ${target.name}`,
          p50Ms: round(over(runs, (m) => m.p50), 3),
          p99Ms: round(over(runs, (m) => m.p99), 3),
          addedP50Ms: round(over(runs, (m, r) => m.p50 - base[r]!.p50), 3),
          addedP99Ms: round(over(runs, (m, r) => m.p99 - base[r]!.p99), 3),
          reqPerSec: Math.round(over(runs, (m) => m.rps)),
          vsDirect: round(over(runs, (m, r) => m.rps / base[r]!.rps), 2),
          vsKubectlProxy: round(over(runs, (m, r) => m.rps / kubectlRuns[r]!.rps), 2),
          vsKubectlProxyMin: round(Math.min(...runs.map((m, r) => m.rps / kubectlRuns[r]!.rps)), 2),
          // CPU of the serving process per request (proxies only), next to the wall-clock figures.
          cpuUsPerRequest: round(over(runs, (m) => m.cpuUsPerRequest), 1),
        });
      });
    }

    rows.push(...decisionRows(server, bucket), await breakerRow());

    progress(`watch events per second: ${WATCH_UPDATES} updates watched through ctrlmesh proxy`);
    const watched = await watchRate(apiUrl, direct);
    rows.push({ case: 'watch through ctrlmesh proxy', events: watched.events, eventsPerSec: watched.perSecond });

    progress(`memory per open watch: ${WATCHES} watches through ctrlmesh proxy`);
    const before = await proxyMemory(ctrlmesh);
    const close = await openWatches(apiUrl, WATCHES);
    await new Promise((r) => setTimeout(r, 2000));
    const during = await proxyMemory(ctrlmesh);
    close();
    rows.push({
      case: `open watches (${WATCHES}), after forced GC`,
      rssKiBPerWatch: round((during.rss - before.rss) / WATCHES / 1024, 1),
      heapKiBPerWatch: round((during.heap - before.heap) / WATCHES / 1024, 1),
    });
    loads.push(loadavg()[0]!);
    rows.push(loadRow('machine load', loads));
    return rows;
  } finally {
    await stopBenchBed({ dir, pools, children, etcd, server });
  }
}

const benchmark: Benchmark = {
  name: 'proxy',
  description:
    `GET and LIST (${OBJECTS} ConfigMaps) on one kube-apiserver: direct, via kubectl proxy, via ctrlmesh proxy (breaker, ` +
    `selector injection, metrics on); ${ROUNDS} interleaved rounds, medians over rounds; latency from ${LATENCY_REQUESTS} sequential calls ` +
    `(wall ms), throughput with ${CONCURRENCY} in flight; watch events/s through the proxy; proxy memory per open ` +
    `watch (${WATCHES} watches, forced GC). Then shard selection on a kube-apiserver v1.37 (ShardedListAndWatch on), ` +
    `one shard of 8/32 fnv buckets: cluster-wide LIST and WATCH of ConfigMaps through proxies selecting by labelSelector, ` +
    `by shardSelector and by filtering everything themselves, vs direct; proxyRead* is /proc/<pid>/io rchar (every read ` +
    `syscall, socket reads included) per list or per update the API server sent. Ratios within one run matter, not absolute ` +
    `figures (shared machine; see the load rows)`,
  run: async ({ progress }) => {
    // BENCH_PROXY_ONLY=shard-selection: the shard-selection rows alone (they need no other row).
    const only = process.env.BENCH_PROXY_ONLY;
    if (only !== undefined && only !== 'shard-selection') throw new Error(`BENCH_PROXY_ONLY=${only}: the only section that runs alone is shard-selection`);
    const rows = only === 'shard-selection' ? [] : await proxyRows(progress);
    rows.push(...(await shardSelectionRows(progress)));
    return rows;
  },
};
export default benchmark;
