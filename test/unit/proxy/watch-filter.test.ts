import { Readable } from 'node:stream';
import { text } from 'node:stream/consumers';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EXPIRED_EVENT, WatchEventFilter } from '../../../src/proxy/index.js';

const event = (type: string, hash: string, rv: string): string =>
  `${JSON.stringify({ type, object: { kind: 'ConfigMap', apiVersion: 'v1', metadata: { name: `cm-${rv}`, resourceVersion: rv, labels: { h: hash } } } })}\n`;

const admitOwned = (metadata: { labels?: Readonly<Record<string, string>> }): boolean => metadata.labels?.h === '1';
const judge = { mustJudge: true, labelKeys: ['h'], admits: admitOwned };

async function run(chunks: string[], bookmarks: boolean): Promise<{ out: string; filtered: number }> {
  let filtered = 0;
  const filter = new WatchEventFilter({ judge, bookmarks, onFiltered: () => filtered++ });
  const out = await text(Readable.from(chunks.map((c) => Buffer.from(c))).pipe(filter));
  return { out, filtered };
}

describe('WatchEventFilter', () => {
  const stream = [event('ADDED', '1', '10'), event('MODIFIED', '2', '11'), event('DELETED', '2', '12'), event('BOOKMARK', '', '13')].join('');

  it('drops ADDED/MODIFIED outside the shard, keeps DELETED and BOOKMARK', async () => {
    const { out, filtered } = await run([stream], false);
    const types = out.trim().split('\n').map((l) => JSON.parse(l).type);
    expect(types).toEqual(['ADDED', 'DELETED', 'BOOKMARK']);
    expect(filtered).toBe(1);
  });

  it('turns filtered events into bookmarks when the client asked for them', async () => {
    const { out } = await run([stream], true);
    const lines = out.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines[1]).toEqual({ type: 'BOOKMARK', object: { kind: 'ConfigMap', apiVersion: 'v1', metadata: { resourceVersion: '11' } } });
  });

  it('gives the same output however the stream is cut into chunks', async () => {
    const whole = (await run([stream], false)).out;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 1, max: stream.length - 1 }), { maxLength: 8 }), async (cuts) => {
        const points = [...new Set(cuts)].sort((a, b) => a - b);
        const chunks = [0, ...points].map((p, i) => stream.slice(p, points[i] ?? stream.length));
        expect((await run(chunks, false)).out).toBe(whole);
      }),
      { numRuns: 50 },
    );
  });

  it('expire() sends 410 Expired and ends the stream', async () => {
    const filter = new WatchEventFilter({ judge, bookmarks: false, onFiltered: () => undefined });
    const collected = text(filter);
    filter.write(event('ADDED', '1', '1'));
    filter.expire();
    const out = await collected;
    expect(out.endsWith(EXPIRED_EVENT)).toBe(true);
    expect(JSON.parse(EXPIRED_EVENT).object.code).toBe(410);
  });
});
