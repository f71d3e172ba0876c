import { loadavg } from 'node:os';
import { Readable } from 'node:stream';
import { Registry } from 'prom-client';
import { createProxyMetrics } from '../src/metrics/index.js';
import { EventScanner } from '../src/proxy/request/answer/json-scan.js';
import { judgeList } from '../src/proxy/request/answer/list-filter.js';
import { WatchEventFilter, type EventJudge, type EventReading } from '../src/proxy/request/answer/watch-filter.js';
import { ClusterShardView } from '../src/proxy/routes/shard-view.js';
import { ClusterMetrics } from '../src/proxy/upstream/cluster-metrics.js';
import type { ClusterRoute, RouteTable } from '../src/transport/index.js';
import { cpuNs, percentile, round, seededRandom, timePerOp, type Benchmark, type BenchRow } from './harness.js';

/**
 * The proxy's watch and list paths in one process, no server: CPU per watch event through the WatchEventFilter
 * (JSON.parse of every event, as before, against the scanner or no reading at all) and CPU per MB of a list through
 * judgeList (echo confirmed: streamed on; not confirmed: read and filtered).
 */

const HASH = 'ctrlmesh.kusionstack.io/sharding-hash';
const LABELS = { hash: HASH, namespace: 'ctrlmesh.kusionstack.io/namespace', control: 'ctrlmesh.kusionstack.io/control' };
const OWNED = [0, 1, 2, 3, 16, 17, 18, 19];
const CHUNK = 64 * 1024;
const ROUNDS = 7;

function view(selection: ClusterRoute['selection']): ClusterShardView {
  const route: ClusterRoute = { name: 'a', server: 'https://a.example:6443', caPem: 'x', buckets: OWNED, limits: [], ...(selection ? { selection } : {}) };
  const table: RouteTable = {
    schema: 1,
    operator: 'op/demo',
    shard: 's1',
    version: 1,
    issuedAt: '2026-11-23T00:00:00Z',
    homeCluster: 'a',
    hashAlgorithm: 'fnv-range',
    bucketCount: 32,
    labels: LABELS,
    leaseSeconds: 30,
    clusters: [route],
  };
  return new ClusterShardView({ table, route, fenced: false });
}

/** Namespaces the shard owns (as the API server would have sent them): a watch of the shard sees only these. */
function ownedNamespaces(v: ClusterShardView, count: number): string[] {
  const names: string[] = [];
  for (let i = 0; names.length < count; i++) if (v.ownsNamespace(`team-${i}`)) names.push(`team-${i}`);
  return names;
}

/** A ConfigMap like an operator's: labels, annotations, managedFields, and `data` padding it to about `bytes`. */
function configMap(random: () => number, namespace: string, bucket: number, index: number, bytes: number): Record<string, unknown> {
  const object: Record<string, unknown> = {
    kind: 'ConfigMap',
    apiVersion: 'v1',
    metadata: {
      name: `cm-${index}`,
      namespace,
      uid: `0a1b2c3d-${String(index).padStart(4, '0')}-4e5f-8a9b-${Math.floor(random() * 1e12).toString(16).padStart(12, '0')}`,
      resourceVersion: String(100_000 + index),
      creationTimestamp: '2026-11-23T07:00:00Z',
      labels: { 'app.kubernetes.io/name': 'demo', tier: 'web', [HASH]: String(bucket) },
      annotations: { 'demo.example.com/owner': 'team "falcon"', 'demo.example.com/config': '{"replicas":3,"namespace":"other"}' },
      managedFields: [{ manager: 'demo-operator', operation: 'Update', apiVersion: 'v1', time: '2026-11-23T07:00:00Z', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { '.': {}, 'f:config': {} }, 'f:metadata': { 'f:labels': { '.': {} } } } }],
    },
    data: {} as Record<string, string>,
  };
  const data = object.data as Record<string, string>;
  let n = 0;
  while (JSON.stringify(object).length < bytes) data[`key-${n++}`] = `value ${n}: ${'x'.repeat(Math.floor(40 + random() * 80))} "quoted" \\ end`;
  return object;
}

function eventStream(v: ClusterShardView, bytes: number, events: number): Buffer {
  const random = seededRandom(bytes);
  const namespaces = ownedNamespaces(v, 64);
  const lines: string[] = [];
  for (let i = 0; i < events; i++) {
    const namespace = namespaces[i % namespaces.length]!;
    lines.push(`${JSON.stringify({ type: i % 5 === 0 ? 'ADDED' : 'MODIFIED', object: configMap(random, namespace, v.bucketOf(namespace), i, bytes) })}\n`);
  }
  return Buffer.from(lines.join(''));
}

function chunks(buffer: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < buffer.length; at += CHUNK) out.push(buffer.subarray(at, Math.min(buffer.length, at + CHUNK)));
  return out;
}

/** CPU ns per event of one filter taking the whole stream (in 64 KiB chunks) and a sink counting its output. */
function filterOnce(input: Buffer[], judge: EventJudge, reading: EventReading): { ns: number; out: number; filtered: number } {
  let out = 0;
  let filtered = 0;
  const start = cpuNs();
  const filter = new WatchEventFilter({ judge, bookmarks: true, onFiltered: () => filtered++, reading, send: (piece) => (out += piece.length) });
  for (const chunk of input) filter.write(chunk);
  filter.end();
  return { ns: cpuNs() - start, out, filtered };
}

async function medianNs(rounds: number, once: () => Promise<number>): Promise<number> {
  await once();
  await once();
  const samples: number[] = [];
  for (let i = 0; i < rounds; i++) samples.push(await once());
  samples.sort((a, b) => a - b);
  return percentile(samples, 0.5);
}

/** A list answer of about `mb` MB of ConfigMaps of ~1 KiB, with or without the echo of the shard selector sent. */
function listBody(v: ClusterShardView, mb: number, echo: string | undefined): Buffer {
  const random = seededRandom(7);
  const namespaces = ownedNamespaces(v, 64);
  const items: string[] = [];
  let size = 0;
  for (let i = 0; size < mb * 1024 * 1024; i++) {
    // A quarter of the items are another shard's (what an unconfirmed list may hold; an echoed one holds none).
    const namespace = i % 4 === 3 && !echo ? `other-${i}` : namespaces[i % namespaces.length]!;
    const item = JSON.stringify(configMap(random, namespace, v.bucketOf(namespace), i, 1024));
    items.push(item);
    size += item.length + 1;
  }
  const metadata = { resourceVersion: '123456', ...(echo ? { shardInfo: { selector: echo } } : {}) };
  return Buffer.from(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":${JSON.stringify(metadata)},"items":[${items.join(',')}]}\n`);
}

async function judgeListOnce(body: Buffer[], expected: string | undefined, v: ClusterShardView): Promise<number> {
  const start = cpuNs();
  // As the handler asks: the judge's admission and the label keys it reads (so a filtered list is scanned, not parsed).
  const judge = v.eventJudge('', 'configmaps');
  const answer = await judgeList(Readable.from(body), { expected, admit: judge.admits, labelKeys: judge.labelKeys, onFiltered: () => undefined, sealContinue: (token) => token });
  let out = 0;
  if (typeof answer === 'string' || Buffer.isBuffer(answer)) out = answer.length;
  else for await (const chunk of answer) out += (chunk as Buffer).length;
  if (out === 0) throw new Error('empty list');
  return cpuNs() - start;
}

const benchmark: Benchmark = {
  name: 'watch-path',
  description: 'CPU per watch event through the event filter (JSON.parse, scan, unread) and per MB of a list through judgeList',
  run: async ({ progress }) => {
    const rows: BenchRow[] = [];
    const loads: number[] = [loadavg()[0]!];
    const labels = view(undefined);
    const ranges = view('shardSelector');
    const labelsJudge = labels.eventJudge('', 'configmaps');
    const rangesJudge = ranges.eventJudge('', 'configmaps');
    // Labels mode as it is judged while a table changes (or as it was before: every event).
    const labelsJudged: EventJudge = { ...labelsJudge, mustJudge: true };
    for (const bytes of [1024, 8192]) {
      const events = bytes === 1024 ? 4000 : 1000;
      const labelsStream = chunks(eventStream(labels, bytes, events));
      const rangesStream = chunks(eventStream(ranges, bytes, events));
      const eventBytes = Math.round(labelsStream.reduce((n, c) => n + c.length, 0) / events);
      const cases: [string, Buffer[], EventJudge, EventReading][] = [
        ['labels: JSON.parse every event (before)', labelsStream, labelsJudged, 'parse'],
        ['labels: scan every event (during a table change)', labelsStream, labelsJudged, 'scan'],
        ['labels: unread (server applied the current selector)', labelsStream, labelsJudge, 'scan'],
        ['shardSelector: JSON.parse every event (before)', rangesStream, rangesJudge, 'parse'],
        ['shardSelector: scan every event (second line of defence)', rangesStream, rangesJudge, 'scan'],
      ];
      for (const [name, stream, judge, reading] of cases) {
        progress(`${name}, ${bytes} B events`);
        let outBytes = 0;
        let filtered = 0;
        const ns = await medianNs(ROUNDS, () => {
          const r = filterOnce(stream, judge, reading);
          outBytes = r.out;
          filtered = r.filtered;
          return Promise.resolve(r.ns);
        });
        rows.push({ case: `watch event, ${name}`, eventBytes, events, nsPerEvent: round(ns / events, 0), cpuMsPerMB: round(ns / 1e6 / (eventBytes * events / 1024 / 1024), 2), filtered, passedBytes: outBytes });
      }
      loads.push(loadavg()[0]!);
      // The scanner alone on one event, for reference.
      const one = eventStream(labels, bytes, 1);
      const scanner = new EventScanner(labelsJudged.labelKeys);
      let sink = 0;
      rows.push({ case: `one event: EventScanner.scan`, eventBytes: one.length, ...timePerOp(() => (sink += scanner.scan(one)?.metadata?.namespace?.length ?? 0), 300) });
      rows.push({ case: `one event: JSON.parse(line.toString())`, eventBytes: one.length, ...timePerOp(() => (sink += (JSON.parse(one.toString('utf8')) as { type: string }).type.length), 300) });
      if (sink < 0) progress('');
    }

    const mb = 16;
    for (const [name, echoed] of [
      ['echo confirmed: streamed on', true],
      ['no echo: read whole and filtered', false],
    ] as const) {
      progress(`list, ${name}`);
      const selector = ranges.selectionFor('', 'configmaps').shardSelector!;
      const body = chunks(listBody(ranges, mb, echoed ? selector : undefined));
      const size = body.reduce((n, c) => n + c.length, 0) / 1024 / 1024;
      const ns = await medianNs(5, () => judgeListOnce(body, selector, ranges));
      rows.push({ case: `list through judgeList, ${name}`, listMB: round(size, 1), cpuMsPerMB: round(ns / 1e6 / size, 2) });
    }
    loads.push(loadavg()[0]!);

    progress('metrics');
    const metrics = new ClusterMetrics(createProxyMetrics(new Registry()), 'a');
    const verbs = ['get', 'list', 'watch', 'update', 'patch'];
    const resources = ['configmaps', 'pods', 'secrets', 'leases'];
    let i = 0;
    rows.push({
      case: 'ClusterMetrics.observe (nested maps: verb, resource, code)',
      ...timePerOp(() => {
        i++;
        metrics.observe(verbs[i % 5]!, resources[i % 4]!, i % 7 === 0 ? 404 : 200, 0.001);
      }),
    });
    // What observe did before: a string key per request.
    const registry = createProxyMetrics(new Registry());
    const byKey = new Map<string, { inc(): void }>();
    const durations = new Map<string, { observe(v: number): void }>();
    rows.push({
      case: 'ClusterMetrics.observe before (string key per request)',
      ...timePerOp(() => {
        i++;
        const verb = verbs[i % 5]!;
        const resource = resources[i % 4]!;
        const code = i % 7 === 0 ? 404 : 200;
        let d = durations.get(verb);
        if (!d) durations.set(verb, (d = registry.requestDuration.labels({ cluster: 'a', verb })));
        d.observe(0.001);
        const key = `${verb} ${resource} ${code}`;
        let c = byKey.get(key);
        if (!c) byKey.set(key, (c = registry.requests.labels({ cluster: 'a', verb, resource, code: String(code) })));
        c.inc();
      }),
    });
    const sorted = loads.sort((a, b) => a - b);
    rows.push({ case: 'machine load (1-min load average)', loadMin: round(sorted[0]!, 2), loadMax: round(sorted.at(-1)!, 2) });
    return rows;
  },
};

export default benchmark;
