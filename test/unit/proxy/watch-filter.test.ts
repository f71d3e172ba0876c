import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EXPIRED_EVENT, WatchEventFilter } from '../../../src/proxy/index.js';

/** An event of an object in namespace `ns-<unit>` whose label `tier` is `tier` (none when empty). */
const event = (type: string, unit: string, rv: string, tier = 'web'): string =>
  `${JSON.stringify({ type, object: { kind: 'ConfigMap', apiVersion: 'v1', metadata: { name: `cm-${rv}`, namespace: `ns-${unit}`, resourceVersion: rv, labels: tier ? { tier } : {} } } })}\n`;

type Metadata = { namespace?: string; labels?: Readonly<Record<string, string>> };
/** The shard owns unit 1 (namespace ns-1), and a limit selects tier=web. */
const owns = (metadata: Metadata): boolean => metadata.namespace === 'ns-1';
const judge = { mustJudge: true, echoSuffices: true, labelKeys: ['tier'], admits: (m: Metadata) => owns(m) && m.labels?.tier === 'web', owns };

function run(chunks: string[], bookmarks: boolean): { out: string; filtered: number; whole: boolean } {
  let filtered = 0;
  const sent: Buffer[] = [];
  const filter = new WatchEventFilter({ judge, bookmarks, onFiltered: () => filtered++, send: (piece) => sent.push(Buffer.from(piece)) });
  for (const chunk of chunks) filter.write(Buffer.from(chunk));
  const whole = filter.end();
  return { out: Buffer.concat(sent).toString('utf8'), filtered, whole };
}

const types = (out: string): string[] => out.trim().split('\n').map((l) => JSON.parse(l).type as string);

describe('WatchEventFilter', () => {
  const stream = [event('ADDED', '1', '10'), event('MODIFIED', '2', '11'), event('DELETED', '2', '12'), event('BOOKMARK', '', '13')].join('');

  it("drops ADDED, MODIFIED and DELETED of another shard's objects (a deleted object arrives whole), keeps BOOKMARK", () => {
    const { out, filtered, whole } = run([stream], false);
    expect(types(out)).toEqual(['ADDED', 'BOOKMARK']);
    expect(filtered).toBe(2);
    expect(whole).toBe(true);
  });

  it("judges a DELETED by its unit alone: an own object that left the limits' selector is forgotten", () => {
    // The API server sends DELETED, with the new labels, when an object stops matching the watch's label selector.
    const { out } = run([event('ADDED', '1', '1'), event('MODIFIED', '1', '2', 'db'), event('DELETED', '1', '3', 'db'), event('DELETED', '2', '4', 'web')], false);
    expect(types(out)).toEqual(['ADDED', 'DELETED']);
    expect(JSON.parse(out.trim().split('\n')[1] as string).object.metadata.name).toBe('cm-3');
  });

  it('drops what it cannot judge: an object without metadata, a Table row without its object, an event without one, a garbled line', () => {
    const bare = (type: string): string => `${JSON.stringify({ type, object: { kind: 'ConfigMap', apiVersion: 'v1', data: { secret: 'x' } } })}\n`;
    const table = `${JSON.stringify({ type: 'ADDED', object: { kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: '5' }, rows: [{ cells: ['other-shard'] }] } })}\n`;
    const unjudged = [bare('ADDED'), bare('DELETED'), bare('SOMETHING'), bare(''), table, '{"type":"ADDED"}\n', '{"type":"ADDED","object":"x"}\n', '{"type":"ADDED",\n', '42\n', '\n'];
    const { out, filtered } = run([...unjudged, event('BOOKMARK', '', '9')], false);
    expect(types(out)).toEqual(['BOOKMARK']);
    expect(filtered).toBe(unjudged.length);
  });

  it('an end after a cut line is not whole, and the cut line is never sent, judged or not', () => {
    const line = event('DELETED', '2', '7');
    for (let cut = 1; cut < line.length; cut++) {
      expect(run([event('ADDED', '1', '6') + line.slice(0, cut)], false)).toEqual({ out: event('ADDED', '1', '6'), filtered: 0, whole: false });
    }
    const unread = new WatchEventFilter({ judge: { ...judge, mustJudge: false }, bookmarks: false, onFiltered: () => undefined, send: () => expect.unreachable() });
    unread.write(Buffer.from(line.slice(0, 30)));
    expect(unread.end()).toBe(false);
  });

  it('turns filtered events into bookmarks when the client asked for them', () => {
    const { out } = run([stream], true);
    const lines = out.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines[1]).toEqual({ type: 'BOOKMARK', object: { kind: 'ConfigMap', apiVersion: 'v1', metadata: { resourceVersion: '11' } } });
  });

  it('gives the same output however the stream is cut into chunks', () => {
    const whole = run([stream], false).out;
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: stream.length - 1 }), { maxLength: 8 }), (cuts) => {
        const points = [...new Set(cuts)].sort((a, b) => a - b);
        const chunks = [0, ...points].map((p, i) => stream.slice(p, points[i] ?? stream.length));
        expect(run(chunks, false).out).toBe(whole);
      }),
      { numRuns: 50 },
    );
  });

  it('expire() sends 410 Expired in place of the unfinished line, and nothing after it', () => {
    const sent: string[] = [];
    const filter = new WatchEventFilter({ judge, bookmarks: false, onFiltered: () => undefined, send: (piece) => sent.push(piece.toString()) });
    filter.write(Buffer.from(`${event('ADDED', '1', '1')}{"type":"ADD`));
    expect(filter.expire()).toBe(true);
    filter.write(Buffer.from(event('ADDED', '1', '2')));
    filter.end();
    expect(sent.join('')).toBe(`${event('ADDED', '1', '1')}${EXPIRED_EVENT}`);
    expect(JSON.parse(EXPIRED_EVENT).object.code).toBe(410);
    // Once ended (or expired), nothing more is sent.
    expect(filter.expire()).toBe(false);
  });
});
