import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { Pool, type Dispatcher } from 'undici';
import { freePort, resolveTool, startApiServer, startEtcd, writeKubeconfig, type ApiServerHandle, type EtcdHandle } from '../src/dev/index.js';
import { ClusterShardView, decide, isRefusal, parseApiRequest } from '../src/proxy/index.js';
import { bucketOf } from '../src/sharding/index.js';
import type { RouteTable } from '../src/transport/index.js';
import CircuitBreaker from 'opossum';
import { bearer, benchCredentials, benchRouteTable, serviceAccountToken, stopBenchBed } from './bench-bed.js';
import { median, processCpuUs, untilMachineQuiet } from './bus.js';
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
/** About a second per target and round: a window of 0.3 s (1,000 GETs) was often one burst of the machine's other work. */
const THROUGHPUT_REQUESTS = 3000;
const CONCURRENCY = 16;
const WATCHES = 200;
const WATCH_UPDATES = 400;
/** The logic-free Node forwarder (bench/probes/forwarder.ts), a target of its own process. */
const FORWARDER = join(HERE, 'probes', 'forwarder.js');
/** BENCH_PROXY_WORKERS=<n>: also n ctrlmesh proxies sharing one port (bench/probes/proxy-workers.ts). */
const PROXY_WORKERS = join(HERE, 'probes', 'proxy-workers.js');
/** LIST 5,000: that many ConfigMaps in a namespace of their own, created LARGE_CREATORS at a time. */
const LARGE_OBJECTS = 5000;
const LARGE_CREATORS = 16;
const LARGE_ROUNDS = 5;
const LARGE_WARMUP = 2;
const LARGE_SEQUENTIAL = 8;
const LARGE_THROUGHPUT = 16;
const LARGE_CONCURRENCY = 4;
/** Watch CPU per event: one watch per target, WATCH_EVENT_UPDATES updates per round, WATCH_EVENT_ROUNDS rounds. */
const WATCH_EVENT_ROUNDS = 5;
const WATCH_EVENT_UPDATES = 500;
const WATCH_WRITERS = 8;
/** Watches opened at once through each proxy, in MANY_WATCH_ROUNDS rounds; every wait for them is bounded. */
export const MANY_WATCHES = 2000;
/**
 * Single storms ranged 0.77-1.25x kubectl proxy's time in one run: five rounds steady the median. BENCH_PROXY_STORMS
 * sets another count, to compare two builds whose difference is smaller than a storm's noise.
 */
const MANY_WATCH_ROUNDS = Math.max(1, Math.trunc(Number(process.env.BENCH_PROXY_STORMS ?? '5')) || 5);
const MANY_WATCH_TIMEOUT_MS = 60_000;
/** Sections of the proxy rows; BENCH_PROXY_ONLY=<section>[,<section>...] runs those alone. */
const SECTIONS = ['get-list', 'decision', 'watch', 'list-5000', 'watch-events', 'watch-open', 'shard-selection'] as const;
type Section = (typeof SECTIONS)[number];

interface Target {
  name: string;
  pool: Dispatcher;
  /** The serving process, for its CPU time per request (none for direct calls). */
  pid?: number;
  /** It serves from worker processes: their CPU counts too. */
  workers?: boolean;
  /** A Node serving process started with the gc-memory probe: memory after a forced GC. */
  child?: ChildProcess;
  /** Where to open plain-HTTP watches (proxies only). */
  url?: string;
}

/** The CPU µs a target's serving process (and its workers) has run so far. */
function targetCpuUs(target: Target): Promise<number> {
  return processCpuUs(target.pid, { descendants: target.workers === true });
}

/** Resident set of a process now, in bytes: /proc/<pid>/status VmRSS (no GC forced). */
async function vmRssBytes(pid: number | undefined): Promise<number> {
  if (pid === undefined) return 0;
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(await readFile(`/proc/${pid}/status`, 'utf8'));
  return Number(match?.[1] ?? Number.NaN) * 1024;
}

/** The kernel's count of connections a full accept queue turned away (TcpExt ListenOverflows, this network namespace). */
async function listenOverflows(): Promise<number> {
  const lines = (await readFile('/proc/net/netstat', 'utf8')).split('\n').filter((l) => l.startsWith('TcpExt:'));
  const [names, values] = [lines[0]?.split(' ') ?? [], lines[1]?.split(' ') ?? []];
  return Number(values[names.indexOf('ListenOverflows')] ?? Number.NaN);
}

async function call(target: Target, path: string, headers?: Record<string, string>): Promise<void> {
  const res = await target.pool.request({ method: 'GET', path, ...(headers ? { headers } : {}) });
  // The whole body: dump() takes a finite limit only (Infinity falls back to 128 KiB, past which it destroys the body,
  // so a LIST of 5,000 was read 128 KiB far and then aborted).
  await res.body.dump({ limit: Number.MAX_SAFE_INTEGER });
  if (res.statusCode !== 200) throw new Error(`${target.name} ${path}: HTTP ${res.statusCode}`);
}

/** Sequential requests (after `warmup` untimed): wall-clock latency per request in ms, sorted. */
async function latencies(target: Target, path: string, count: number, warmup = 30, headers?: Record<string, string>): Promise<number[]> {
  for (let i = 0; i < warmup; i++) await call(target, path, headers);
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = process.hrtime.bigint();
    await call(target, path, headers);
    times.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  return times.sort((a, b) => a - b);
}

/** `count` requests with `concurrency` in flight: requests per second. */
async function throughput(target: Target, path: string, count: number, concurrency = CONCURRENCY, headers?: Record<string, string>): Promise<number> {
  let next = 0;
  const start = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < count) await call(target, path, headers);
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

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolves `promise`'s value, or `undefined` after `ms`, clearing its timer either way. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** The median over rounds of `f`, a figure of one round (taken within the round, e.g. a ratio to kubectl proxy's). */
function overRounds<R>(runs: readonly R[], f: (run: R, r: number) => number): number {
  return median(runs.map(f));
}

/** A namespace name whose bucket is `bucket`: the proxy serves only the namespaces of its route table's buckets. */
function namespaceInBucket(prefix: string, bucket: number): string {
  for (let k = 0; k < 100_000; k++) {
    const name = `${prefix}-${k}`;
    if (bucketOf(name, { algorithm: 'kusionstack', bucketCount: 32 }) === bucket) return name;
  }
  throw new Error(`no namespace name ${prefix}-<n> falls in bucket ${bucket}`);
}

/** The collection's current resourceVersion (a list of one item), for a watch that starts from now. */
async function resourceVersionOf(admin: Target, namespace: string): Promise<string> {
  const res = await admin.pool.request({ method: 'GET', path: `/api/v1/namespaces/${namespace}/configmaps?limit=1` });
  const body = (await res.body.json()) as { metadata: { resourceVersion: string } };
  return body.metadata.resourceVersion;
}

/** What every section gets: the API server, the targets and the progress line. */
interface Bed {
  server: ApiServerHandle;
  direct: Target;
  /** direct, kubectl proxy, forwarder, ctrlmesh proxy (and the baseline builds): kubectl proxy is at index 1. */
  targets: Target[];
  /** The forwarder with watches as node:http2 streams: a further target of the storm of watches only. */
  watchFloor?: Target;
  bucket: number;
  labels: Record<string, string>;
  progress: (message: string) => void;
}

/** Creates `count` ConfigMaps of ~0.5 KiB in `namespace` (and the namespace), LARGE_CREATORS at a time. */
async function createMany(bed: Bed, namespace: string, count: number): Promise<void> {
  const { direct, labels, progress } = bed;
  const post = async (path: string, object: unknown): Promise<void> => {
    const res = await direct.pool.request({ method: 'POST', path, headers: { 'content-type': 'application/json' }, body: JSON.stringify(object) });
    await res.body.dump();
    if (res.statusCode !== 201 && res.statusCode !== 409) throw new Error(`POST ${path}: HTTP ${res.statusCode}`);
  };
  await post('/api/v1/namespaces', { metadata: { name: namespace, labels } });
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: LARGE_CREATORS }, async () => {
      while (next < count) {
        const i = next++;
        if (i > 0 && i % 1000 === 0) progress(`LIST ${LARGE_OBJECTS}: ${i}/${count} ConfigMaps created`);
        await post(`/api/v1/namespaces/${namespace}/configmaps`, {
          metadata: { name: `cm-${i}`, labels: { ...labels, app: 'bench', tier: `t${i % 7}` } },
          data: { i: String(i), note: `bench object ${i} `.padEnd(120, '.'), owner: `team-${i % 13}` },
        });
      }
    }),
  );
  progress(`LIST ${LARGE_OBJECTS}: ${count} ConfigMaps created in ${round((performance.now() - started) / 1000, 1)} s`);
}

/** GET and LIST 100 through every target: latency, throughput and the serving process's CPU per request. */
async function getListRows(bed: Bed): Promise<BenchRow[]> {
  const { server, targets, progress } = bed;
  const apiPid = server.pid();
  const paths = { GET: `/api/v1/namespaces/${NAMESPACE}/configmaps/cm-1`, LIST: `/api/v1/namespaces/${NAMESPACE}/configmaps?labelSelector=app%3Dbench` };
  const rows: BenchRow[] = [];
  const loads: number[] = [loadavg()[0]!];
  const WARMUP = 30;
  for (const [verb, path] of Object.entries(paths)) {
    // Per target: one { p50, p99, rps } per round. Targets take turns within a round (order rotated each
    // round), so a burst of other work on the machine lands on all of them rather than on one.
    const perRound = targets.map(() => [] as { p50: number; p99: number; rps: number; cpuUsPerRequest: number; apiCpuUsPerRequest: number }[]);
    for (let r = 0; r < ROUNDS; r++) {
      progress(`${verb} round ${r + 1}/${ROUNDS}: each target ${LATENCY_REQUESTS} sequential, then ${THROUGHPUT_REQUESTS} with ${CONCURRENCY} in flight`);
      for (let k = 0; k < targets.length; k++) {
        const t = (r + k) % targets.length;
        const [cpuBefore, apiBefore] = [await targetCpuUs(targets[t]!), await processCpuUs(apiPid)];
        const times = await latencies(targets[t]!, path, LATENCY_REQUESTS, WARMUP);
        const rps = await throughput(targets[t]!, path, THROUGHPUT_REQUESTS);
        const [cpuAfter, apiAfter] = [await targetCpuUs(targets[t]!), await processCpuUs(apiPid)];
        // The warm-up requests are served too: they count.
        const served = WARMUP + LATENCY_REQUESTS + THROUGHPUT_REQUESTS;
        perRound[t]!.push({ p50: percentile(times, 0.5), p99: percentile(times, 0.99), rps, cpuUsPerRequest: (cpuAfter - cpuBefore) / served, apiCpuUsPerRequest: (apiAfter - apiBefore) / served });
      }
      loads.push(loadavg()[0]!);
    }
    const [base, kubectlRuns] = [perRound[0]!, perRound[1]!];
    // Added latency and ratios are taken within each round (same conditions), then the median over rounds.
    targets.forEach((target, t) => {
      const runs = perRound[t]!;
      rows.push({
        case: `${verb} ${target.name}`,
        p50Ms: round(overRounds(runs, (m) => m.p50), 3),
        p99Ms: round(overRounds(runs, (m) => m.p99), 3),
        addedP50Ms: round(overRounds(runs, (m, r) => m.p50 - base[r]!.p50), 3),
        addedP99Ms: round(overRounds(runs, (m, r) => m.p99 - base[r]!.p99), 3),
        reqPerSec: Math.round(overRounds(runs, (m) => m.rps)),
        vsDirect: round(overRounds(runs, (m, r) => m.rps / base[r]!.rps), 2),
        vsKubectlProxy: round(overRounds(runs, (m, r) => m.rps / kubectlRuns[r]!.rps), 2),
        vsKubectlProxyMin: round(Math.min(...runs.map((m, r) => m.rps / kubectlRuns[r]!.rps)), 2),
        // CPU of the serving process per request (proxies only), next to the wall-clock figures.
        ...(target.pid === undefined
          ? {}
          : {
              cpuUsPerRequest: round(overRounds(runs, (m) => m.cpuUsPerRequest), 1),
              cpuVsKubectlProxy: round(overRounds(runs, (m, r) => m.cpuUsPerRequest / kubectlRuns[r]!.cpuUsPerRequest), 2),
            }),
        // What the same requests cost the API server: the other half of the two cores throughput is shared by.
        apiServerCpuUsPerRequest: round(overRounds(runs, (m) => m.apiCpuUsPerRequest), 1),
        apiServerCpuVsKubectlProxy: round(overRounds(runs, (m, r) => m.apiCpuUsPerRequest / kubectlRuns[r]!.apiCpuUsPerRequest), 2),
      });
    });
  }
  loads.push(loadavg()[0]!);
  rows.push(loadRow('GET and LIST 100: machine load', loads));
  return rows;
}

/**
 * LIST of LARGE_OBJECTS ConfigMaps through every target: wall ms, lists/s, CPU of the serving process and the API
 * server; by a client that asks for no encoding, then by one that asks for gzip, as client-go does.
 */
async function largeListRows(bed: Bed): Promise<BenchRow[]> {
  const namespace = namespaceInBucket('bench-large', bed.bucket);
  bed.progress(`LIST ${LARGE_OBJECTS}: creating namespace ${namespace} and ${LARGE_OBJECTS} ConfigMaps (${LARGE_CREATORS} at a time)`);
  await createMany(bed, namespace, LARGE_OBJECTS);
  return [...(await largeListClientRows(bed, namespace, 'plain')), ...(await largeListClientRows(bed, namespace, 'gzip'))];
}

async function largeListClientRows(bed: Bed, namespace: string, client: 'plain' | 'gzip'): Promise<BenchRow[]> {
  const { server, targets, progress } = bed;
  // The API server compresses an answer over 128 KiB for a client that asks; every proxy passes it on encoded.
  const headers = client === 'gzip' ? { 'accept-encoding': 'gzip' } : undefined;
  const name = client === 'gzip' ? `LIST ${LARGE_OBJECTS} (client asks for gzip)` : `LIST ${LARGE_OBJECTS}`;
  const path = `/api/v1/namespaces/${namespace}/configmaps?labelSelector=app%3Dbench`;
  // Every target must list all of them (ctrlmesh adds its shard's selector; every object carries the bucket's label).
  const checks = new Map<Target, { items: number; bytes: number }>();
  for (const target of targets) {
    const res = await target.pool.request({ method: 'GET', path, ...(headers ? { headers } : {}) });
    const bytes = Buffer.from(await res.body.arrayBuffer());
    const text = res.headers['content-encoding'] === 'gzip' ? gunzipSync(bytes).toString('utf8') : bytes.toString('utf8');
    checks.set(target, { items: res.statusCode === 200 ? ((JSON.parse(text) as { items: unknown[] }).items.length) : -res.statusCode, bytes: bytes.length });
  }
  const apiPid = server.pid();
  const loads: number[] = [loadavg()[0]!];
  type Run = { p50: number; max: number; rps: number; cpuUs: number; apiCpuUs: number };
  const perRound = targets.map(() => [] as Run[]);
  const perTarget = LARGE_WARMUP + LARGE_SEQUENTIAL + LARGE_THROUGHPUT;
  for (let r = 0; r < LARGE_ROUNDS; r++) {
    progress(`${name} round ${r + 1}/${LARGE_ROUNDS}: each target ${LARGE_SEQUENTIAL} sequential, then ${LARGE_THROUGHPUT} with ${LARGE_CONCURRENCY} in flight`);
    for (let k = 0; k < targets.length; k++) {
      const t = (r + k) % targets.length;
      const target = targets[t]!;
      const [cpu0, api0] = [await targetCpuUs(target), await processCpuUs(apiPid)];
      const times = await latencies(target, path, LARGE_SEQUENTIAL, LARGE_WARMUP, headers);
      const rps = await throughput(target, path, LARGE_THROUGHPUT, LARGE_CONCURRENCY, headers);
      const [cpu1, api1] = [await targetCpuUs(target), await processCpuUs(apiPid)];
      perRound[t]!.push({ p50: percentile(times, 0.5), max: times.at(-1)!, rps, cpuUs: (cpu1 - cpu0) / perTarget, apiCpuUs: (api1 - api0) / perTarget });
    }
    loads.push(loadavg()[0]!);
  }
  const [base, kubectlRuns] = [perRound[0]!, perRound[1]!];
  const rows: BenchRow[] = targets.map((target, t) => {
    const runs = perRound[t]!;
    const check = checks.get(target)!;
    return {
      case: `${name} ${target.name}`,
      items: check.items,
      KiBPerList: round(check.bytes / 1024, 0),
      p50Ms: round(overRounds(runs, (m) => m.p50), 1),
      maxMs: round(overRounds(runs, (m) => m.max), 1),
      addedP50Ms: round(overRounds(runs, (m, r) => m.p50 - base[r]!.p50), 1),
      listsPerSec: round(overRounds(runs, (m) => m.rps), 1),
      vsDirect: round(overRounds(runs, (m, r) => m.rps / base[r]!.rps), 2),
      vsKubectlProxy: round(overRounds(runs, (m, r) => m.rps / kubectlRuns[r]!.rps), 2),
      ...(target.pid === undefined
        ? {}
        : {
            cpuUsPerRequest: Math.round(overRounds(runs, (m) => m.cpuUs)),
            cpuVsKubectlProxy: round(overRounds(runs, (m, r) => m.cpuUs / kubectlRuns[r]!.cpuUs), 2),
          }),
      // The API server's CPU per list of this target: kubectl proxy asks for gzip for a client that does not (Go's
      // transport does), the others do not.
      apiServerCpuUsPerRequest: Math.round(overRounds(runs, (m) => m.apiCpuUs)),
    };
  });
  loads.push(loadavg()[0]!);
  rows.push(loadRow(`${name}: machine load`, loads));
  return rows;
}

/** A counter for the watched updates' values: every patch changes its object, so every one is an event. */
let watchSeq = 0;

/**
 * One watch through `target` (from the current resourceVersion, so no initial events) while WATCH_WRITERS writers
 * send `updates` patches straight to the API server: events delivered, events/s, and the serving process's CPU
 * from the first patch until the last event arrived (its idle work included), per event.
 */
async function watchEvents(target: Target, admin: Target, updates: number): Promise<{ events: number; perSecond: number; cpuUsPerEvent: number }> {
  const rv = await resourceVersionOf(admin, NAMESPACE);
  const controller = new AbortController();
  const res = await target.pool.request({
    method: 'GET',
    path: `/api/v1/namespaces/${NAMESPACE}/configmaps?watch=true&resourceVersion=${rv}`,
    signal: controller.signal,
    headersTimeout: 20_000,
  });
  if (res.statusCode !== 200) throw new Error(`${target.name}: watch answered HTTP ${res.statusCode}`);
  let events = 0;
  let allIn: () => void = () => undefined;
  const done = new Promise<void>((resolve) => (allIn = resolve));
  res.body.on('error', () => undefined);
  res.body.on('data', (chunk: Buffer) => {
    for (let at = chunk.indexOf(0x0a); at !== -1; at = chunk.indexOf(0x0a, at + 1)) events++;
    if (events >= updates) allIn();
  });
  const cpu0 = await targetCpuUs(target);
  const start = process.hrtime.bigint();
  let next = 0;
  await Promise.all(
    Array.from({ length: WATCH_WRITERS }, async () => {
      while (next < updates) {
        const i = next++;
        const r = await admin.pool.request({
          method: 'PATCH',
          path: `/api/v1/namespaces/${NAMESPACE}/configmaps/cm-${i % OBJECTS}`,
          headers: { 'content-type': 'application/merge-patch+json' },
          body: JSON.stringify({ data: { w: String(++watchSeq) } }),
        });
        await r.body.dump();
      }
    }),
  );
  await within(done, 20_000);
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const cpu1 = await targetCpuUs(target);
  controller.abort();
  return { events, perSecond: events / seconds, cpuUsPerEvent: (cpu1 - cpu0) / Math.max(events, 1) };
}

/** Watch events through every target, one target at a time, WATCH_EVENT_ROUNDS rounds in rotated order. */
async function watchEventRows(bed: Bed): Promise<BenchRow[]> {
  const { direct, targets, progress } = bed;
  const loads: number[] = [loadavg()[0]!];
  const perRound = targets.map(() => [] as { events: number; perSecond: number; cpuUsPerEvent: number }[]);
  for (let r = 0; r < WATCH_EVENT_ROUNDS; r++) {
    progress(`watch events round ${r + 1}/${WATCH_EVENT_ROUNDS}: one watch per target, ${WATCH_EVENT_UPDATES} updates each`);
    for (let k = 0; k < targets.length; k++) {
      const t = (r + k) % targets.length;
      perRound[t]!.push(await watchEvents(targets[t]!, direct, WATCH_EVENT_UPDATES));
    }
    loads.push(loadavg()[0]!);
  }
  const kubectlRuns = perRound[1]!;
  const rows: BenchRow[] = targets.map((target, t) => {
    const runs = perRound[t]!;
    return {
      case: `watch events ${target.name}`,
      updates: WATCH_EVENT_UPDATES,
      eventsMin: Math.min(...runs.map((m) => m.events)),
      eventsPerSec: Math.round(overRounds(runs, (m) => m.perSecond)),
      ...(target.pid === undefined
        ? {}
        : {
            cpuUsPerEvent: round(overRounds(runs, (m) => m.cpuUsPerEvent), 1),
            cpuPerEventVsKubectlProxy: round(overRounds(runs, (m, r) => m.cpuUsPerEvent / kubectlRuns[r]!.cpuUsPerEvent), 2),
          }),
    };
  });
  loads.push(loadavg()[0]!);
  rows.push(loadRow('watch events: machine load', loads));
  return rows;
}

interface ManyWatches {
  /** Wall ms until the last watch had its response head (or failed). */
  openMs: number;
  headP50Ms: number;
  failed: number;
  /** The first failure, for the report. */
  failure: string;
  close(): Promise<void>;
}

/** Opens MANY_WATCHES watches of `path` at once through `url`, each on a connection of its own (as informers in many pods). */
export async function openManyWatches(url: string, path: string): Promise<ManyWatches> {
  const pool = new Pool(url, { connections: null, bodyTimeout: 0, headersTimeout: MANY_WATCH_TIMEOUT_MS, connect: { timeout: MANY_WATCH_TIMEOUT_MS } });
  const heads: number[] = [];
  let failed = 0;
  let failure = '';
  const start = performance.now();
  await Promise.all(
    Array.from({ length: MANY_WATCHES }, async () => {
      try {
        const res = await pool.request({ method: 'GET', path });
        heads.push(performance.now() - start);
        if (res.statusCode === 200) {
          res.body.on('error', () => undefined);
          res.body.resume();
          return;
        }
        failed++;
        failure ||= `HTTP ${res.statusCode}: ${(await res.body.text()).slice(0, 200)}`;
      } catch (err) {
        failed++;
        failure ||= `${(err as { code?: string }).code ?? ''} ${(err as Error).message}`;
      }
    }),
  );
  const openMs = performance.now() - start;
  heads.sort((a, b) => a - b);
  return { openMs, headP50Ms: percentile(heads, 0.5) ?? Number.NaN, failed, failure, close: () => pool.destroy() };
}

/** The items in a random order (Fisher-Yates). */
function shuffled<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

/**
 * MANY_WATCHES watches opened at once through each proxy: the time until all have their response head, failures,
 * the serving process's CPU per watch opened, and its memory per open watch (VmRSS; RSS and heap after a forced GC
 * for the Node processes). Memory is the first round's: a process keeps the memory it grew to, so later rounds
 * reuse it and would read near zero.
 */
async function manyWatchRows(bed: Bed): Promise<BenchRow[]> {
  const { direct, targets, progress } = bed;
  const proxies = [...targets.filter((t) => t.url !== undefined), ...(bed.watchFloor ? [bed.watchFloor] : [])];
  const loads: number[] = [loadavg()[0]!];
  type Run = {
    openMs: number;
    headP50Ms: number;
    failed: number;
    failure: string;
    cpuUsPerWatch: number;
    /** The API server's CPU, and the opening client's (this process), per watch over the same storm. */
    apiCpuUsPerWatch: number;
    clientCpuUsPerWatch: number;
    overflows: number;
  };
  const perRound = proxies.map(() => [] as Run[]);
  const memory = new Map<Target, { vmRss: number; gcRss?: number; heap?: number; failed: number }>();
  const watchPath = async (): Promise<string> =>
    `/api/v1/namespaces/${NAMESPACE}/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion=${await resourceVersionOf(direct, NAMESPACE)}`;
  // One storm through every target first, its time not counted: memory per watch is read on it (the first storm
  // grows a process's heap and RSS, later ones reuse them). The timed rounds then meet proxies and an API server that
  // have opened such a storm before (compiled code, grown heaps and stacks), as a route change does in service.
  // Without it the target that opened round 1 met a cold API server: kubectl proxy's first storm took 1.5-2.5 s,
  // its later ones 0.4-0.7 s (bench/results/history.md, 2026-11-27).
  for (const target of proxies) {
    progress(`${MANY_WATCHES} watches at once, warm-up and memory (time not counted): ${target.name}`);
    const gc0 = target.child ? await proxyMemory(target.child) : undefined;
    const rss0 = await vmRssBytes(target.pid);
    const opened = await openManyWatches(target.url!, await watchPath());
    await sleep(2000);
    const rss1 = await vmRssBytes(target.pid);
    const gc1 = target.child ? await proxyMemory(target.child) : undefined;
    const open = MANY_WATCHES - opened.failed;
    if (opened.failed > 0) progress(`${target.name}: ${opened.failed} of ${MANY_WATCHES} watches failed, first: ${opened.failure}`);
    memory.set(target, {
      failed: opened.failed,
      vmRss: (rss1 - rss0) / open,
      ...(gc0 && gc1 ? { gcRss: (gc1.rss - gc0.rss) / open, heap: (gc1.heap - gc0.heap) / open } : {}),
    });
    await opened.close();
    await untilMachineQuiet();
  }
  for (let r = 0; r < MANY_WATCH_ROUNDS; r++) {
    // A storm pays for what the one before left (the HTTP/1.1 forwarder's 2,000 TLS connections closing): rotated, the
    // targets would always follow the same neighbour, and two builds side by side would differ by their places
    // (about 20 % of CPU a watch: bench/results/history.md, 2026-11-28). Each round takes them in an order of its own.
    for (const t of shuffled(proxies.map((_, i) => i))) {
      const target = proxies[t]!;
      progress(`${MANY_WATCHES} watches at once, round ${r + 1}/${MANY_WATCH_ROUNDS}: ${target.name}`);
      const path = await watchPath();
      const apiPid = bed.server.pid();
      const [cpu0, api0, overflow0] = [await targetCpuUs(target), await processCpuUs(apiPid), await listenOverflows()];
      const client0 = process.cpuUsage();
      const opened = await openManyWatches(target.url!, path);
      const client = process.cpuUsage(client0);
      const [cpu1, api1, overflow1] = [await targetCpuUs(target), await processCpuUs(apiPid), await listenOverflows()];
      perRound[t]!.push({
        openMs: opened.openMs,
        headP50Ms: opened.headP50Ms,
        failed: opened.failed,
        failure: opened.failure,
        cpuUsPerWatch: (cpu1 - cpu0) / MANY_WATCHES,
        apiCpuUsPerWatch: (api1 - api0) / MANY_WATCHES,
        clientCpuUsPerWatch: (client.user + client.system) / MANY_WATCHES,
        overflows: overflow1 - overflow0,
      });
      // Each round's figures, and the load, on stderr: three rounds on a shared machine can differ several-fold.
      progress(`${target.name}: ${Math.round(opened.openMs)} ms, ${overflow1 - overflow0} listen overflows, load ${loadavg()[0]!.toFixed(2)}`);
      if (opened.failed > 0) progress(`${target.name}: ${opened.failed} of ${MANY_WATCHES} watches failed, first: ${opened.failure}`);
      await opened.close();
      // The proxy and the API server let the closed watches go before the next target opens its own: a storm that
      // starts while the API server still tears down the last one's connections pays for them (targets follow each
      // other in the same order in every round, so it would always be the same one).
      await untilMachineQuiet();
      loads.push(loadavg()[0]!);
    }
  }
  const kubectlAt = proxies.findIndex((p) => p === targets[1]);
  const forwarder = proxies.find((p) => p.name === 'Node forwarder');
  const kubectlRuns = perRound[kubectlAt]!;
  const kib = (bytes: number | undefined): number | undefined => (bytes === undefined ? undefined : round(bytes / 1024, 1));
  const rows: BenchRow[] = proxies.map((target, t) => {
    const runs = perRound[t]!;
    const mem = memory.get(target)!;
    const fwd = forwarder ? memory.get(forwarder) : undefined;
    const row: BenchRow = {
      case: `${MANY_WATCHES} watches opened at once, ${target.name}`,
      openAllMs: Math.round(overRounds(runs, (m) => m.openMs)),
      openAllMsMax: Math.round(Math.max(...runs.map((m) => m.openMs))),
      headP50Ms: Math.round(overRounds(runs, (m) => m.headP50Ms)),
      openVsKubectlProxy: round(overRounds(runs, (m, r) => m.openMs / kubectlRuns[r]!.openMs), 2),
      // The warm-up storm's too: a failed watch is one whenever it happens.
      failed: runs.reduce((sum, m) => sum + m.failed, mem.failed),
      listenOverflows: runs.reduce((sum, m) => sum + m.overflows, 0),
      cpuUsPerWatchOpened: Math.round(overRounds(runs, (m) => m.cpuUsPerWatch)),
      // The storm keeps every core busy: its time follows the CPU all three processes spend on a watch.
      apiServerCpuUsPerWatch: Math.round(overRounds(runs, (m) => m.apiCpuUsPerWatch)),
      clientCpuUsPerWatch: Math.round(overRounds(runs, (m) => m.clientCpuUsPerWatch)),
      cpuOfAllVsKubectlProxy: round(
        overRounds(runs, (m, r) => {
          const k = kubectlRuns[r]!;
          return (m.cpuUsPerWatch + m.apiCpuUsPerWatch + m.clientCpuUsPerWatch) / (k.cpuUsPerWatch + k.apiCpuUsPerWatch + k.clientCpuUsPerWatch);
        }),
        2,
      ),
      vmRssKiBPerWatch: kib(mem.vmRss)!,
    };
    if (mem.gcRss !== undefined) row.gcRssKiBPerWatch = kib(mem.gcRss)!;
    if (mem.heap !== undefined) row.heapKiBPerWatch = kib(mem.heap)!;
    if (fwd && target !== forwarder) {
      row.vmRssVsForwarder = round(mem.vmRss / fwd.vmRss, 2);
      if (mem.gcRss !== undefined && fwd.gcRss !== undefined) row.gcRssVsForwarder = round(mem.gcRss / fwd.gcRss, 2);
    }
    return row;
  });
  loads.push(loadavg()[0]!);
  rows.push(loadRow(`${MANY_WATCHES} watches: machine load`, loads));
  return rows;
}

/** Direct, kubectl proxy, the logic-free Node forwarder and ctrlmesh proxy on one kube-apiserver of the default version. */
async function proxyRows(progress: (message: string) => void, sections: ReadonlySet<Section>): Promise<BenchRow[]> {
  const dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-bench-proxy-'));
  const children: ChildProcess[] = [];
  const pools: Dispatcher[] = [];
  let etcd: EtcdHandle | undefined;
  let server: ApiServerHandle | undefined;
  try {
    progress('starting etcd and a kube-apiserver');
    etcd = await startEtcd({ dir: join(dir, 'etcd') });
    server = await startApiServer({ etcd, name: 'bench', dir: join(dir, 'bench') });
    // Every target (direct calls and the three proxies) authenticates alike: by default with a ServiceAccount's token,
    // as a deployed sidecar should; BENCH_PROXY_CREDENTIALS=client-certificate uses the admin's client certificate.
    const credentials = benchCredentials();
    const certificate = { ca: server.caPem, cert: server.clientCertPem, key: server.clientKeyPem, rejectUnauthorized: true };
    const admin = new Pool(server.server, { connections: 1, connect: certificate });
    pools.push(admin);
    const token = credentials === 'token' ? await serviceAccountToken(admin) : undefined;
    const proxyKubeconfig = join(dir, 'proxy.kubeconfig');
    await writeKubeconfig(proxyKubeconfig, [
      { name: server.name, server: server.server, caPem: server.caPem, ...(token === undefined ? { clientCertPem: server.clientCertPem, clientKeyPem: server.clientKeyPem } : { token }) },
    ]);
    const direct: Target = {
      name: 'direct',
      pool:
        token === undefined
          ? new Pool(server.server, { connections: CONCURRENCY, connect: certificate })
          : new Pool(server.server, { connections: CONCURRENCY, connect: { ca: server.caPem, rejectUnauthorized: true } }).compose(bearer(token)),
    };
    pools.push(direct.pool);
    progress(`every target authenticates with ${credentials === 'token' ? "a ServiceAccount's token" : "the admin's client certificate"}`);
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
    const kubectlProxy = spawn(kubectl.path, ['proxy', `--port=${kubectlPort}`, '--address=127.0.0.1', `--kubeconfig=${proxyKubeconfig}`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(kubectlProxy);
    await waitForLine(kubectlProxy, /Starting to serve on/);

    progress('starting the logic-free Node forwarder');
    const caFile = join(dir, 'fwd-ca.crt');
    await writeFile(caFile, server.caPem);
    // BENCH_PROXY_CPU_PROF=<dir>: a CPU profile of every proxy over the whole run (the forwarders' in <dir>/forwarder),
    // written when it stops, so that ctrlmesh's is read beside the floor's of the same run.
    const cpuProfile = (into: string): string[] => (process.env.BENCH_PROXY_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${join(process.env.BENCH_PROXY_CPU_PROF, into)}`] : []);
    const startForwarder = async (...mode: string[]): Promise<{ child: ChildProcess; url: string }> => {
      const port = await freePort();
      const child = spawn(
        process.execPath,
        [...cpuProfile('forwarder'), '--expose-gc', '--import', pathToFileURL(GC_PROBE).href, FORWARDER, server!.server, caFile, proxyKubeconfig, String(port), ...mode],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      children.push(child);
      await waitForLine(child, /forwarder listening on/);
      return { child, url: `http://127.0.0.1:${port}` };
    };
    const { child: forwarder, url: forwarderUrl } = await startForwarder();
    // The storm's floor: its watches as ctrlmesh's go, as node:http2 streams.
    const watchFloor = sections.has('watch-open') ? await startForwarder('h2-watches') : undefined;

    progress('starting ctrlmesh proxy (built CLI)');
    await writeFile(join(dir, 'table.json'), JSON.stringify(routeTable(server, bucket)));
    const startCtrlmesh = async (cli: string, name: string, nodeFlags: readonly string[] = []): Promise<{ child: ChildProcess; apiUrl: string }> => {
      const [apiPort, opsPort] = [await freePort(), await freePort()];
      const child = spawn(
        process.execPath,
        [
          ...nodeFlags,
          '--expose-gc', '--import', pathToFileURL(GC_PROBE).href,
          ...cpuProfile('.'),
          cli, 'proxy', '--route-table', join(dir, 'table.json'), '--credentials', proxyKubeconfig, '--store', join(dir, `store-${name}.json`),
          '--listen', `127.0.0.1:${apiPort}`, '--ops-listen', `127.0.0.1:${opsPort}`, '--log-level', 'warn',
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      children.push(child);
      await waitForLine(child, /proxy listening on/);
      return { child, apiUrl: `http://127.0.0.1:${apiPort}` };
    };
    const { child: ctrlmesh, apiUrl } = await startCtrlmesh(CLI, 'current');
    // BENCH_PROXY_BASELINE=<another checkout's dist/src/cli/main.js>[ <node flag>...][,<another>...]: those builds run
    // beside this one, in the same rounds, named by their checkout's folder and the flags node runs them with.
    const baselineClis = (process.env.BENCH_PROXY_BASELINE ?? '').split(',').filter((entry) => entry.trim() !== '');
    const baselines: { name: string; child: ChildProcess; apiUrl: string; workers?: boolean }[] = [];
    for (const [i, entry] of baselineClis.entries()) {
      const [cli, ...nodeFlags] = entry.trim().split(/\s+/u) as [string, ...string[]];
      const checkout = [basename(resolve(dirname(cli), '../../..')), ...nodeFlags].join(' ');
      baselines.push({ name: `ctrlmesh proxy (baseline build ${checkout})`, ...(await startCtrlmesh(cli, `baseline-${i}`, nodeFlags)) });
    }
    const workers = Number(process.env.BENCH_PROXY_WORKERS ?? '0');
    if (workers > 0) {
      baselines.push({ name: `ctrlmesh proxy x${workers} processes (no coordination)`, workers: true, ...(await startCtrlmesh(PROXY_WORKERS, 'workers')) });
    }

    const proxyTarget = (name: string, url: string, child: ChildProcess, gc: boolean, workers = false): Target => ({
      name,
      pool: new Pool(url, { connections: CONCURRENCY }),
      pid: child.pid,
      url,
      ...(gc ? { child } : {}),
      ...(workers ? { workers } : {}),
    });
    const kubectlUrl = `http://127.0.0.1:${kubectlPort}`;
    const targets: Target[] = [
      direct,
      proxyTarget('kubectl proxy', kubectlUrl, kubectlProxy, false),
      proxyTarget('Node forwarder', forwarderUrl, forwarder, true),
      proxyTarget('ctrlmesh proxy', apiUrl, ctrlmesh, true),
      ...baselines.map((b) => proxyTarget(b.name, b.apiUrl, b.child, true, b.workers)),
    ];
    pools.push(...targets.slice(1).map((t) => t.pool));
    const bed: Bed = {
      server,
      direct,
      targets,
      bucket,
      labels,
      progress,
      ...(watchFloor ? { watchFloor: proxyTarget('Node forwarder, watches as HTTP/2 streams', watchFloor.url, watchFloor.child, true) } : {}),
    };
    if (bed.watchFloor) pools.push(bed.watchFloor.pool);
    const rows: BenchRow[] = [];

    if (sections.has('get-list')) rows.push(...(await getListRows(bed)));
    if (sections.has('decision')) rows.push(...decisionRows(server, bucket), await breakerRow());

    if (sections.has('watch')) {
      const loads: number[] = [loadavg()[0]!];
      progress(`watch events per second: ${WATCH_UPDATES} updates watched through ctrlmesh proxy`);
      const watched = await watchRate(apiUrl, direct);
      rows.push({ case: 'watch through ctrlmesh proxy', events: watched.events, eventsPerSec: watched.perSecond });

      progress(`memory per open watch: ${WATCHES} watches through ctrlmesh proxy`);
      const before = await proxyMemory(ctrlmesh);
      const close = await openWatches(apiUrl, WATCHES);
      await sleep(2000);
      const during = await proxyMemory(ctrlmesh);
      close();
      rows.push({
        case: `open watches (${WATCHES}), after forced GC`,
        rssKiBPerWatch: round((during.rss - before.rss) / WATCHES / 1024, 1),
        heapKiBPerWatch: round((during.heap - before.heap) / WATCHES / 1024, 1),
      });
      loads.push(loadavg()[0]!);
      rows.push(loadRow('watch (ctrlmesh only): machine load', loads));
      // The watches just closed are let go before the next section.
      await sleep(2000);
    }

    if (sections.has('watch-events')) rows.push(...(await watchEventRows(bed)));
    if (sections.has('watch-open')) rows.push(...(await manyWatchRows(bed)));
    // Last: its 5,000 objects would be in every other section's API server otherwise.
    if (sections.has('list-5000')) rows.push(...(await largeListRows(bed)));
    return rows;
  } finally {
    await stopBenchBed({ dir, pools, children, etcd, server });
  }
}

const benchmark: Benchmark = {
  name: 'proxy',
  description:
    `GET and LIST (${OBJECTS} ConfigMaps) on one kube-apiserver: direct, via kubectl proxy, via a logic-free Node forwarder ` +
    `(node:http + one undici Pool), via ctrlmesh proxy (breaker, selector injection, metrics on); ${ROUNDS} interleaved rounds, ` +
    `medians over rounds; latency from ${LATENCY_REQUESTS} sequential calls (wall ms), throughput with ${CONCURRENCY} in flight, ` +
    `CPU µs of the serving process per request; watch events/s and CPU per event through each proxy (${WATCH_EVENT_ROUNDS} rounds of ` +
    `${WATCH_EVENT_UPDATES} updates); ${MANY_WATCHES} watches opened at once through each proxy and through the forwarder with ` +
    `watches as node:http2 streams (memory per open watch on a first storm, then time to all response heads over ${MANY_WATCH_ROUNDS} rounds; failures in all); LIST of ${LARGE_OBJECTS} ConfigMaps through each target (${LARGE_ROUNDS} rounds). ` +
    `Then shard selection on a kube-apiserver v1.37 (ShardedListAndWatch on), ` +
    `one shard of 8/32 fnv buckets: cluster-wide LIST and WATCH of ConfigMaps through proxies selecting by labelSelector, ` +
    `by shardSelector and by filtering everything themselves, vs direct; proxyRead* is /proc/<pid>/io rchar (every read ` +
    `syscall, socket reads included) per list or per update the API server sent. Ratios within one run matter, not absolute ` +
    `figures (shared machine; see the load rows)`,
  run: async ({ progress }) => {
    // BENCH_PROXY_ONLY=<section>[,<section>...]: those sections alone (the bed is started for them whatever they are).
    const only = process.env.BENCH_PROXY_ONLY;
    const wanted = only === undefined || only === '' ? [...SECTIONS] : only.split(',').map((s) => s.trim());
    const unknown = wanted.filter((s) => !(SECTIONS as readonly string[]).includes(s));
    if (unknown.length > 0) throw new Error(`BENCH_PROXY_ONLY: no section ${unknown.join(', ')}; there are ${SECTIONS.join(', ')}`);
    const sections = new Set(wanted as Section[]);
    const rows = [...sections].some((s) => s !== 'shard-selection') ? await proxyRows(progress, sections) : [];
    if (sections.has('shard-selection')) rows.push(...(await shardSelectionRows(progress)));
    return rows;
  },
};
export default benchmark;
