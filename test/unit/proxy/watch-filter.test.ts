import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EXPIRED_EVENT, WatchEventFilter } from '../../../src/proxy/index.js';

const event = (type: string, hash: string, rv: string): string =>
  `${JSON.stringify({ type, object: { kind: 'ConfigMap', apiVersion: 'v1', metadata: { name: `cm-${rv}`, resourceVersion: rv, labels: { h: hash } } } })}\n`;

const admitOwned = (metadata: { labels?: Readonly<Record<string, string>> }): boolean => metadata.labels?.h === '1';
const judge = { mustJudge: true, labelKeys: ['h'], admits: admitOwned };

function run(chunks: string[], bookmarks: boolean): { out: string; filtered: number } {
  let filtered = 0;
  const sent: Buffer[] = [];
  const filter = new WatchEventFilter({ judge, bookmarks, onFiltered: () => filtered++, send: (piece) => sent.push(Buffer.from(piece)) });
  for (const chunk of chunks) filter.write(Buffer.from(chunk));
  filter.end();
  return { out: Buffer.concat(sent).toString('utf8'), filtered };
}

describe('WatchEventFilter', () => {
  const stream = [event('ADDED', '1', '10'), event('MODIFIED', '2', '11'), event('DELETED', '2', '12'), event('BOOKMARK', '', '13')].join('');

  it('drops ADDED/MODIFIED outside the shard, keeps DELETED and BOOKMARK', () => {
    const { out, filtered } = run([stream], false);
    const types = out.trim().split('\n').map((l) => JSON.parse(l).type);
    expect(types).toEqual(['ADDED', 'DELETED', 'BOOKMARK']);
    expect(filtered).toBe(1);
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
