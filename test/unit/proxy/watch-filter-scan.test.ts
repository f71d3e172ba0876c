import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WatchEventFilter, type EventJudge, type EventReading } from '../../../src/proxy/request/answer/watch-filter.js';
import { ClusterShardView } from '../../../src/proxy/routes/shard-view.js';
import { clusterFixture, routeTableFixture } from './route-table-fixture.js';

const HASH = 'h';

function run(chunks: Buffer[], judge: EventJudge, reading: EventReading, bookmarks: boolean): { out: string; filtered: number; pieces: number } {
  let filtered = 0;
  const sent: Buffer[] = [];
  const filter = new WatchEventFilter({ judge, bookmarks, onFiltered: () => filtered++, reading, send: (piece) => sent.push(Buffer.from(piece)) });
  for (const chunk of chunks) filter.write(chunk);
  filter.end();
  return { out: Buffer.concat(sent).toString('utf8'), filtered, pieces: sent.length };
}

function cut(stream: Buffer, cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => c % stream.length))].filter((p) => p > 0).sort((a, b) => a - b);
  return [0, ...points].map((p, i) => stream.subarray(p, points[i] ?? stream.length));
}

const objectArb = fc.record({
  namespace: fc.constantFrom('ns-0', 'ns-1', 'ns-2', 'ns-3', 'ns-4', 'a"b', 'ns\\5'),
  hash: fc.constantFrom('1', '2', '3', '01', ''),
  tier: fc.option(fc.constantFrom('web', 'db'), { nil: undefined }),
  rv: fc.nat({ max: 10_000 }),
  spec: fc.string({ maxLength: 60 }),
});
const lineArb = fc.oneof(
  { weight: 8, arbitrary: fc.tuple(fc.constantFrom('ADDED', 'MODIFIED', 'DELETED'), objectArb) },
  { weight: 1, arbitrary: fc.constantFrom('table', 'bookmark', 'garbage', 'blank', 'duplicate', 'escaped-key', 'null-object') },
);

function render(line: [string, { namespace: string; hash: string; tier?: string; rv: number; spec: string }] | string): string {
  if (typeof line !== 'string') {
    const [type, o] = line;
    const labels: Record<string, string> = { [HASH]: o.hash, app: 'x' };
    if (o.tier) labels.tier = o.tier;
    return JSON.stringify({ type, object: { kind: 'ConfigMap', apiVersion: 'v1', metadata: { name: 'cm', namespace: o.namespace, resourceVersion: String(o.rv), labels }, data: { spec: o.spec, namespace: 'ns-1' } } });
  }
  switch (line) {
    case 'table':
      return JSON.stringify({
        type: 'ADDED',
        object: { kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: '9' }, rows: [{ object: { metadata: { namespace: 'ns-1', labels: { [HASH]: '1' } } } }, { object: { metadata: { namespace: 'ns-2', labels: { [HASH]: '2' } } } }] },
      });
    case 'bookmark':
      return '{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"12"}}}';
    case 'garbage':
      return '{"type":"ADDED","object":{';
    case 'blank':
      return '';
    case 'duplicate':
      return '{"type":"ADDED","object":{"metadata":{"namespace":"ns-1","labels":{"h":"2"}},"metadata":{"namespace":"ns-2","labels":{"h":"1"}}}}';
    case 'escaped-key':
      return '{"type":"MODIFIED","object":{"metadata":{"n\\u0061mespace":"ns-2","labels":{"h":"2"}}}}';
    default:
      return '{"type":"ADDED","object":null}';
  }
}

function views(): { labels: ClusterShardView; ranges: ClusterShardView; limited: ClusterShardView } {
  const limits = [{ relateResources: [{ apiGroups: [''], resources: ['configmaps'] }], selector: { matchLabels: { tier: 'web' } } }];
  const make = (overrides: Parameters<typeof clusterFixture>[2], algorithm: 'fnv-range' | 'kusionstack') => {
    const route = clusterFixture('a', [1, 3, 5, 8, 13, 21], overrides);
    return new ClusterShardView({ table: routeTableFixture({ hashAlgorithm: algorithm, clusters: [route] }), route, fenced: false });
  };
  return { labels: make({}, 'kusionstack'), ranges: make({ selection: 'shardSelector' }, 'fnv-range'), limited: make({ selection: 'proxyFilter', limits }, 'fnv-range') };
}

describe('WatchEventFilter, scanning', () => {
  it('sends the same bytes as the JSON.parse path, whatever the events, the mode and the chunking', () => {
    const { labels, ranges, limited } = views();
    expect(ranges.selectionFor('', 'configmaps').shardSelector).toMatch(/^shardRange/);
    const judges: EventJudge[] = [
      // Labels mode judged anyway (as while a table changes): the hash label and the limits.
      { ...labels.eventJudge('', 'configmaps'), mustJudge: true },
      ranges.eventJudge('', 'configmaps'),
      limited.eventJudge('', 'configmaps'),
      ranges.eventJudge('', 'namespaces'),
    ];
    fc.assert(
      fc.property(fc.array(lineArb, { minLength: 1, maxLength: 12 }), fc.array(fc.nat(), { maxLength: 6 }), fc.nat({ max: judges.length - 1 }), fc.boolean(), (lines, cuts, which, bookmarks) => {
        const stream = Buffer.from(lines.map((l) => `${render(l as never)}\n`).join(''));
        const judge = judges[which]!;
        const parsed = run([stream], judge, 'parse', bookmarks);
        const scanned = run(cut(stream, cuts), judge, 'scan', bookmarks);
        expect(scanned.out).toBe(parsed.out);
        expect(scanned.filtered).toBe(parsed.filtered);
      }),
      { numRuns: 400 },
    );
  });

  it('passes the bytes unread, a chunk at a time, where the API server applied the selector; a cut last line never', () => {
    const judge = views().labels.eventJudge('', 'configmaps');
    expect(judge.mustJudge).toBe(false);
    const whole = ['{"type":"ADDED","object":{"metadata":{"labels":{"h":"2"}}}}', 'not json', ''].join('\n');
    const stream = Buffer.from(`${whole}{"type":"ADDED"`);
    fc.assert(
      fc.property(fc.array(fc.nat(), { maxLength: 6 }), (cuts) => {
        const chunks = cut(stream, cuts);
        const { out, filtered, pieces } = run(chunks, judge, 'scan', false);
        expect(out).toBe(whole);
        expect(filtered).toBe(0);
        // Each chunk goes in at most two pieces (up to its last newline, then its unfinished line), never copied.
        expect(pieces).toBeLessThanOrEqual(2 * chunks.length);
      }),
      { numRuns: 100 },
    );
  });

  it('sends consecutive lines that pass as one piece, and a bookmark after the lines before it', () => {
    const judge = { ...views().labels.eventJudge('', 'configmaps'), mustJudge: true };
    const event = (h: string, rv: number): string => `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"${rv}","labels":{"h":"${h}"}}}}\n`;
    const stream = Buffer.from([event('1', 1), event('3', 2), event('2', 3), event('5', 4), event('8', 5)].join(''));
    const { out, pieces, filtered } = run([stream], judge, 'scan', true);
    expect(filtered).toBe(1);
    expect(pieces).toBe(3);
    expect(out.split('\n').filter(Boolean).map((l) => JSON.parse(l).type)).toEqual(['ADDED', 'ADDED', 'BOOKMARK', 'ADDED', 'ADDED']);
    expect(JSON.parse(out.split('\n')[2]!).object.metadata.resourceVersion).toBe('3');
  });

  it('judges by the judge it is given, from the next line on', () => {
    const { labels } = views();
    const judge = labels.eventJudge('', 'configmaps');
    const sent: string[] = [];
    const filter = new WatchEventFilter({ judge, bookmarks: false, onFiltered: () => undefined, send: (piece) => sent.push(piece.toString()) });
    filter.write(Buffer.from('{"type":"ADDED","object":{"metadata":{"labels":{"h":"2"}}}}\n{"type":"ADD'));
    // A table change that keeps the watch but must be judged (as shardSelector watches are): the held line is judged.
    filter.judge = { ...judge, mustJudge: true };
    filter.write(Buffer.from('ED","object":{"metadata":{"labels":{"h":"2"}}}}\n{"type":"ADDED","object":{"metadata":{"labels":{"h":"1"}}}}\n'));
    filter.end();
    expect(sent.join('').split('\n').filter(Boolean)).toEqual(['{"type":"ADDED","object":{"metadata":{"labels":{"h":"2"}}}}', '{"type":"ADDED","object":{"metadata":{"labels":{"h":"1"}}}}']);
  });
});
