/**
 * The `proxy` benchmark's shard-selection rows (main.ts does not run this module on its own): list and watch through
 * ctrlmesh proxies that keep one shard to its buckets by label selector, by the API server's shard selector, and by
 * filtering everything themselves, against the same objects on one kube-apiserver v1.37 (its ShardedListAndWatch
 * gate on), with direct requests as the baseline. Added latency, and what each proxy process reads to serve it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { freePort, parseKubeVersion, resolveTool, startApiServer, startEtcd, type ApiServerHandle, type EtcdHandle } from '../src/dev/index.js';
import { NAMESPACE_FIELD, bucketOf, rangesOfBuckets, renderShardSelector } from '../src/sharding/index.js';
import type { RouteTable } from '../src/transport/index.js';
import { benchRouteTable, stopBenchBed } from './bench-bed.js';
import { median, processCpuUs } from './bus.js';
import { loadRow, percentile, round, seededRandom, waitForLine, type BenchRow } from './harness.js';

/** dist/bench/shard-selection.js -> dist/src/cli/main.js (the built CLI, run as the sidecar would be). */
const CLI = join(fileURLToPath(new URL('.', import.meta.url)), '..', 'src', 'cli', 'main.js');
const KUBE = parseKubeVersion('v1.37', 'bench shard-selection');
const HASH_LABEL = 'ctrlmesh.kusionstack.io/shard-hash';
const BUCKETS = 32;
/** The shard's buckets: two runs of four, so the shard selector has two `shardRange` terms. */
const OWNED = [0, 1, 2, 3, 16, 17, 18, 19];
const CONFIGMAPS_PER_NAMESPACE = 50;
const ROUNDS = 7;
const LISTS_PER_ROUND = 30;
const LIST_WARMUP = 3;
const WATCH_ROUNDS = 5;
const WATCH_UPDATES = 400;
const WRITERS = 8;

type Mode = 'labels' | 'shardSelector' | 'proxyFilter';
const MODES: readonly Mode[] = ['labels', 'shardSelector', 'proxyFilter'];

interface Target {
  name: string;
  pool: Pool;
  /** The query a list or watch of every namespace's ConfigMaps is sent with (a direct call names the shard itself). */
  query: string;
  /** The ctrlmesh proxy's process (none for direct calls). */
  pid?: number;
  /** Its ops port, for /metrics. */
  opsUrl?: string;
}

/** Bytes the process has read so far, by any read syscall (sockets included): /proc/<pid>/io `rchar`. */
async function bytesRead(pid: number | undefined): Promise<number> {
  if (pid === undefined) return 0;
  const match = /^rchar: (\d+)$/m.exec(await readFile(`/proc/${pid}/io`, 'utf8'));
  return Number(match?.[1] ?? 0);
}

/** One namespace per fnv bucket: the first of `ns-<word>-<n>` (seeded) to land in each bucket. */
function namespacesPerBucket(): string[] {
  const random = seededRandom(16);
  const words = ['falcon', 'otter', 'lynx', 'heron', 'bison', 'raven', 'gecko', 'orca'];
  const byBucket = new Map<number, string>();
  for (let n = 0; byBucket.size < BUCKETS && n < 100_000; n++) {
    const name = `team-${words[Math.floor(random() * words.length)]}${n}-prod`;
    const bucket = bucketOf(name, { algorithm: 'fnv-range', bucketCount: BUCKETS });
    if (!byBucket.has(bucket)) byBucket.set(bucket, name);
  }
  return [...byBucket.entries()].sort((a, b) => a[0] - b[0]).map(([, name]) => name);
}

function routeTable(server: ApiServerHandle, selection: Mode): RouteTable {
  return benchRouteTable(server, { hashAlgorithm: 'fnv-range', hashLabel: HASH_LABEL, route: { buckets: OWNED, ...(selection === 'labels' ? {} : { selection }) } });
}

async function request(pool: Pool, method: string, path: string, body?: unknown): Promise<{ status: number; text: string }> {
  const res = await pool.request({
    method,
    path,
    ...(body === undefined ? {} : { headers: { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }, body: JSON.stringify(body) }),
  });
  return { status: res.statusCode, text: await res.body.text() };
}

/** One list, timed: wall ms and the bytes the client received. */
async function timedList(target: Target): Promise<{ ms: number; bytes: number }> {
  const start = process.hrtime.bigint();
  const res = await target.pool.request({ method: 'GET', path: `/api/v1/configmaps?${target.query}` });
  let bytes = 0;
  for await (const chunk of res.body) bytes += (chunk as Buffer).length;
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (res.statusCode !== 200) throw new Error(`${target.name}: list answered HTTP ${res.statusCode}`);
  return { ms, bytes };
}

/** What a list through `target` holds, as `namespace/name`, and whether it carries the API server's echo. */
async function listed(target: Target): Promise<{ items: Set<string>; echo: string | undefined }> {
  const { status, text } = await request(target.pool, 'GET', `/api/v1/configmaps?${target.query}`);
  if (status !== 200) throw new Error(`${target.name}: list answered HTTP ${status}: ${text.slice(0, 300)}`);
  const body = JSON.parse(text) as { metadata?: { shardInfo?: { selector?: string } }; items: { metadata: { namespace: string; name: string } }[] };
  return { items: new Set(body.items.map((i) => `${i.metadata.namespace}/${i.metadata.name}`)), echo: body.metadata?.shardInfo?.selector };
}

/** `ctrlmesh_proxy_lists_filtered_total` by reason, from the proxy's /metrics. */
async function listsFiltered(target: Target): Promise<Record<string, number>> {
  if (target.opsUrl === undefined) return {};
  const text = await (await fetch(`${target.opsUrl}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^ctrlmesh_proxy_lists_filtered_total\{[^}]*reason="([^"]+)"[^}]*\} (\S+)$/gm)) out[m[1]!] = (out[m[1]!] ?? 0) + Number(m[2]);
  return out;
}

interface WatchRun {
  /** Why the client's watch ended early, if it did. */
  error?: string;
  events: number;
  perSecond: number;
  /** ms from sending an update to its event reaching the client, sorted. */
  delivery: number[];
  bytes: number;
}

/**
 * Watches every target at once from `resourceVersion` while WRITERS writers send WATCH_UPDATES updates spread over
 * all namespaces in turn; each update carries its index, so a client can tell when the event of update i arrives.
 */
async function watchRound(
  targets: Target[],
  admin: Pool,
  namespaces: string[],
  expected: number,
  roundIndex: number,
  sample: () => Promise<void>,
): Promise<WatchRun[]> {
  // Update i of round r writes n = r * WATCH_UPDATES + i: a value the object never had, so every patch is a change.
  const offset = roundIndex * WATCH_UPDATES;
  const { text } = await request(admin, 'GET', '/api/v1/configmaps?limit=1');
  const rv = (JSON.parse(text) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  const controller = new AbortController();
  const sent: number[] = [];
  const runs = await Promise.all(
    targets.map(async (target) => {
      const res = await target.pool.request({
        method: 'GET',
        path: `/api/v1/configmaps?${target.query}&watch=1&resourceVersion=${rv}`,
        signal: controller.signal,
        bodyTimeout: 0,
      });
      if (res.statusCode !== 200) throw new Error(`${target.name}: watch answered HTTP ${res.statusCode}`);
      const run: WatchRun = { events: 0, perSecond: 0, delivery: [], bytes: 0 };
      let first = 0n;
      let last = 0n;
      let pending = '';
      const done = (async () => {
        for await (const chunk of res.body) {
          run.bytes += (chunk as Buffer).length;
          pending += (chunk as Buffer).toString('utf8');
          let newline = pending.indexOf('\n');
          while (newline >= 0) {
            const line = pending.slice(0, newline);
            pending = pending.slice(newline + 1);
            newline = pending.indexOf('\n');
            const event = JSON.parse(line) as { type: string; object?: { data?: { n?: string } } };
            const n = Number(event.object?.data?.n) - offset;
            if (event.type !== 'MODIFIED' || !Number.isInteger(n) || sent[n] === undefined) continue;
            const now = process.hrtime.bigint();
            run.delivery.push(Number(now) / 1e6 - sent[n]!);
            run.events++;
            last = now;
            if (first === 0n) first = now;
          }
          if (run.events >= expected) break;
        }
      })().catch((err: unknown) => {
        if (!controller.signal.aborted) run.error = (err as Error).message;
      });
      return { run, done, rate: () => (last > first ? Math.round((run.events - 1) / (Number(last - first) / 1e9)) : 0) };
    }),
  );
  await sample();
  let next = 0;
  await Promise.all(
    Array.from({ length: WRITERS }, async () => {
      while (next < WATCH_UPDATES) {
        const i = next++;
        const ns = namespaces[i % namespaces.length]!;
        const cm = `cm-${Math.floor(i / namespaces.length) % CONFIGMAPS_PER_NAMESPACE}`;
        sent[i] = Number(process.hrtime.bigint()) / 1e6;
        const r = await request(admin, 'PATCH', `/api/v1/namespaces/${ns}/configmaps/${cm}`, { data: { n: String(offset + i) } });
        if (r.status !== 200) throw new Error(`update ${ns}/${cm}: HTTP ${r.status}`);
      }
    }),
  );
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(runs.map((r) => r.done)), new Promise((r) => (timer = setTimeout(r, 15_000)))]);
  clearTimeout(timer);
  await sample();
  controller.abort();
  return runs.map(({ run, rate }) => ({ ...run, perSecond: rate(), delivery: run.delivery.sort((a, b) => a - b) }));
}

/**
 * Rows for `npm run bench -- proxy`: starts (and stops) its own etcd, a kube-apiserver v1.37 and three ctrlmesh
 * proxies. Without a v1.37 kube-apiserver (none cached and no Go build possible) it returns one row saying why.
 */
export async function shardSelectionRows(progress: (message: string) => void): Promise<BenchRow[]> {
  const section = 'shard selection (kube-apiserver v1.37)';
  let binary: string;
  try {
    progress(`${section}: resolving kube-apiserver ${KUBE.version}`);
    binary = (await resolveTool('kube-apiserver', { kubeVersion: KUBE, onProgress: progress })).path;
  } catch (err) {
    return [{ case: `${section}: skipped`, reason: `no kube-apiserver ${KUBE.version}: ${(err as Error).message}` }];
  }
  const dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-bench-shard-selection-'));
  const children: ChildProcess[] = [];
  const pools: Pool[] = [];
  let etcd: EtcdHandle | undefined;
  let server: ApiServerHandle | undefined;
  try {
    progress(`${section}: starting etcd and kube-apiserver ${KUBE.version} (ShardedListAndWatch on)`);
    etcd = await startEtcd({ dir: join(dir, 'etcd') });
    server = await startApiServer({ etcd, name: 'bench', dir: join(dir, 'bench'), binary, kubeVersion: KUBE });
    const tls = { ca: server.caPem, cert: server.clientCertPem, key: server.clientKeyPem, rejectUnauthorized: true };
    const admin = new Pool(server.server, { connections: WRITERS, connect: tls });
    pools.push(admin);

    const namespaces = namespacesPerBucket();
    if (namespaces.length !== BUCKETS) throw new Error(`found namespaces for ${namespaces.length} of ${BUCKETS} buckets`);
    const owned = new Set(OWNED);
    const ownedNamespaces = namespaces.filter((ns) => owned.has(bucketOf(ns, { algorithm: 'fnv-range', bucketCount: BUCKETS })));
    progress(`${section}: creating ${BUCKETS} namespaces (one per fnv bucket) x ${CONFIGMAPS_PER_NAMESPACE} ConfigMaps of ~1 KiB, all labelled`);
    const payload = 'x'.repeat(1000);
    const jobs: (() => Promise<void>)[] = [];
    for (const ns of namespaces) {
      const labels = { [HASH_LABEL]: String(bucketOf(ns, { algorithm: 'fnv-range', bucketCount: BUCKETS })) };
      const made = await request(admin, 'POST', '/api/v1/namespaces', { metadata: { name: ns, labels } });
      if (made.status !== 201) throw new Error(`namespace ${ns}: HTTP ${made.status}: ${made.text.slice(0, 200)}`);
      for (let i = 0; i < CONFIGMAPS_PER_NAMESPACE; i++) {
        jobs.push(async () => {
          const r = await request(admin, 'POST', `/api/v1/namespaces/${ns}/configmaps`, { metadata: { name: `cm-${i}`, labels }, data: { payload, n: '-1' } });
          if (r.status !== 201) throw new Error(`configmap ${ns}/cm-${i}: HTTP ${r.status}: ${r.text.slice(0, 200)}`);
        });
      }
    }
    await Promise.all(Array.from({ length: WRITERS }, async () => {
      for (let job = jobs.shift(); job; job = jobs.shift()) await job();
    }));

    progress(`${section}: starting 3 ctrlmesh proxies (labels, shardSelector, proxyFilter), buckets ${OWNED.join(',')} of ${BUCKETS}`);
    const startProxy = async (mode: Mode): Promise<Target> => {
      const tableFile = join(dir, `table-${mode}.json`);
      await writeFile(tableFile, JSON.stringify(routeTable(server!, mode)));
      const [apiPort, opsPort] = [await freePort(), await freePort()];
      const child = spawn(
        process.execPath,
        [
          CLI, 'proxy', '--route-table', tableFile, '--credentials', server!.kubeconfigPath, '--store', join(dir, `store-${mode}.json`),
          '--listen', `127.0.0.1:${apiPort}`, '--ops-listen', `127.0.0.1:${opsPort}`, '--log-level', 'warn',
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      children.push(child);
      await waitForLine(child, /proxy listening on/);
      const pool = new Pool(`http://127.0.0.1:${apiPort}`, { connections: 2 });
      pools.push(pool);
      return { name: `ctrlmesh proxy, ${mode}`, pool, query: '', pid: child.pid, opsUrl: `http://127.0.0.1:${opsPort}` };
    };
    const selector = `${HASH_LABEL} in (${OWNED.join(',')})`;
    const shardSelector = renderShardSelector(NAMESPACE_FIELD, rangesOfBuckets(OWNED, BUCKETS));
    const direct: Target = { name: 'direct, labelSelector', pool: new Pool(server.server, { connections: 2, connect: tls }), query: `labelSelector=${encodeURIComponent(selector)}` };
    const directShard: Target = { name: 'direct, shardSelector', pool: new Pool(server.server, { connections: 2, connect: tls }), query: `shardSelector=${encodeURIComponent(shardSelector)}` };
    pools.push(direct.pool, directShard.pool);
    const proxies: Target[] = [];
    for (const mode of MODES) proxies.push(await startProxy(mode));
    const targets = [direct, directShard, ...proxies];

    // Every target must answer the same items: the shard's namespaces' ConfigMaps. A difference is reported, not hidden.
    progress(`${section}: checking that every target lists the same ConfigMaps`);
    const want = await listed(direct);
    const checks = new Map<Target, { items: number; same: boolean; echo: boolean }>();
    for (const target of targets) {
      const got = target === direct ? want : await listed(target);
      const same = got.items.size === want.items.size && [...got.items].every((k) => want.items.has(k));
      checks.set(target, { items: got.items.size, same, echo: got.echo !== undefined });
    }
    const expectedItems = ownedNamespaces.length * CONFIGMAPS_PER_NAMESPACE;
    if (want.items.size !== expectedItems) progress(`${section}: direct label-selected list has ${want.items.size} items, expected ${expectedItems}`);
    const echoed = checks.get(directShard)!.echo;
    if (!echoed) progress(`${section}: the API server did not echo the shard selector: is ShardedListAndWatch on?`);

    const loads: number[] = [loadavg()[0]!];
    const filteredBefore = await Promise.all(targets.map(listsFiltered));
    const apiPid = server.pid();
    type ListRun = { p50: number; p99: number; clientBytes: number; cpuUs: number; readBytes: number; apiCpuUs: number };
    const perRound = targets.map(() => [] as ListRun[]);
    for (let r = 0; r < ROUNDS; r++) {
      progress(`${section}: LIST round ${r + 1}/${ROUNDS}: each of ${targets.length} targets ${LISTS_PER_ROUND} sequential lists of every namespace's ConfigMaps`);
      for (let k = 0; k < targets.length; k++) {
        const t = (r + k) % targets.length;
        const target = targets[t]!;
        for (let i = 0; i < LIST_WARMUP; i++) await timedList(target);
        const [cpu0, read0, api0] = [await processCpuUs(target.pid), await bytesRead(target.pid), await processCpuUs(apiPid)];
        const times: number[] = [];
        let clientBytes = 0;
        for (let i = 0; i < LISTS_PER_ROUND; i++) {
          const one = await timedList(target);
          times.push(one.ms);
          clientBytes += one.bytes;
        }
        const [cpu1, read1, api1] = [await processCpuUs(target.pid), await bytesRead(target.pid), await processCpuUs(apiPid)];
        times.sort((a, b) => a - b);
        perRound[t]!.push({
          p50: percentile(times, 0.5),
          p99: percentile(times, 0.99),
          clientBytes: clientBytes / LISTS_PER_ROUND,
          cpuUs: (cpu1 - cpu0) / LISTS_PER_ROUND,
          readBytes: (read1 - read0) / LISTS_PER_ROUND,
          apiCpuUs: (api1 - api0) / LISTS_PER_ROUND,
        });
      }
      loads.push(loadavg()[0]!);
    }
    const filteredAfter = await Promise.all(targets.map(listsFiltered));
    const rows: BenchRow[] = [];
    const base = perRound[0]!;
    targets.forEach((target, t) => {
      const runs = perRound[t]!;
      const over = (f: (run: ListRun, r: number) => number): number => median(runs.map(f));
      const check = checks.get(target)!;
      const filtered = (reason: string): number => (filteredAfter[t]![reason] ?? 0) - (filteredBefore[t]![reason] ?? 0);
      rows.push({
        case: `LIST /api/v1/configmaps, ${target.name}`,
        items: check.items,
        sameItemsAsDirect: check.same,
        echo: check.echo,
        p50Ms: round(over((m) => m.p50), 2),
        p99Ms: round(over((m) => m.p99), 2),
        addedP50Ms: round(over((m, r) => m.p50 - base[r]!.p50), 2),
        clientKiBPerList: round(over((m) => m.clientBytes) / 1024, 1),
        ...(target.pid === undefined
          ? {}
          : {
              proxyReadKiBPerList: round(over((m) => m.readBytes) / 1024, 1),
              proxyCpuUsPerList: Math.round(over((m) => m.cpuUs)),
              // Lists the proxy read whole and filtered itself during the timed rounds (warm-ups included).
              filteredNoEcho: filtered('no-echo'),
              filteredUnlabelled: filtered('unlabelled'),
            }),
        apiServerCpuUsPerList: Math.round(over((m) => m.apiCpuUs)),
      });
    });

    const expectedEvents = WATCH_UPDATES * (ownedNamespaces.length / namespaces.length);
    type WatchFigures = WatchRun & { cpuUs: number; readBytes: number };
    const watchRounds: WatchFigures[][] = [];
    const apiWatchCpu: number[] = [];
    for (let r = 0; r < WATCH_ROUNDS; r++) {
      progress(`${section}: WATCH round ${r + 1}/${WATCH_ROUNDS}: a watch per target open while ${WATCH_UPDATES} updates go to all ${namespaces.length} namespaces`);
      let before: { cpu: number; read: number }[] = [];
      let after: { cpu: number; read: number }[] = [];
      const api: number[] = [];
      const sample = async (): Promise<void> => {
        const now = await Promise.all(targets.map(async (t) => ({ cpu: await processCpuUs(t.pid), read: await bytesRead(t.pid) })));
        api.push(await processCpuUs(apiPid));
        if (before.length === 0) before = now;
        else after = now;
      };
      const runs = await watchRound(targets, admin, namespaces, expectedEvents, r, sample);
      watchRounds.push(runs.map((run, t) => ({ ...run, cpuUs: (after[t]!.cpu - before[t]!.cpu) / WATCH_UPDATES, readBytes: (after[t]!.read - before[t]!.read) / WATCH_UPDATES })));
      apiWatchCpu.push((api[1]! - api[0]!) / WATCH_UPDATES);
      loads.push(loadavg()[0]!);
    }
    targets.forEach((target, t) => {
      const runs = watchRounds.map((perTarget) => perTarget[t]!);
      const over = (f: (run: WatchFigures, r: number) => number): number => median(runs.map(f));
      rows.push({
        case: `WATCH /api/v1/configmaps, ${target.name}`,
        updates: WATCH_UPDATES,
        events: Math.round(over((m) => m.events)),
        expectedEvents,
        eventsPerSec: Math.round(over((m) => m.perSecond)),
        deliveryP50Ms: round(over((m) => percentile(m.delivery, 0.5)), 2),
        deliveryP99Ms: round(over((m) => percentile(m.delivery, 0.99)), 2),
        addedDeliveryP50Ms: round(over((m, r) => percentile(m.delivery, 0.5) - percentile(watchRounds[r]![0]!.delivery, 0.5)), 2),
        clientBytesPerUpdate: Math.round(over((m) => m.bytes / WATCH_UPDATES)),
        ...(target.pid === undefined
          ? {}
          : { proxyReadBytesPerUpdate: Math.round(over((m) => m.readBytes)), proxyCpuUsPerUpdate: round(over((m) => m.cpuUs), 1) }),
        ...(runs.some((m) => m.error !== undefined) ? { watchError: `${runs.filter((m) => m.error !== undefined).length} rounds: ${runs.find((m) => m.error !== undefined)!.error}` } : {}),
      });
    });
    rows.push({ case: `WATCH: kube-apiserver CPU per update (all ${targets.length} watches open)`, apiServerCpuUsPerUpdate: round(median(apiWatchCpu), 1) });
    loads.push(loadavg()[0]!);
    rows.push(loadRow(`${section}: machine load`, loads));
    return rows;
  } finally {
    await stopBenchBed({ dir, pools, children, etcd, server });
  }
}
