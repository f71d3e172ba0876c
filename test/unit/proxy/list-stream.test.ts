import { markContinue } from './route-table-fixture.js';
import { PassThrough, Readable } from 'node:stream';
import { setImmediate as tick } from 'node:timers/promises';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { UnjudgedListError } from '../../../src/errors.js';
import { filterListBody, filterListBytes, judgeList } from '../../../src/proxy/request/answer/list-filter.js';
import { drain } from './drain.js';

const SELECTOR = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')";

function list(items: number, echo: boolean): string {
  const metadata = echo ? { resourceVersion: '1', shardInfo: { selector: SELECTOR } } : { resourceVersion: '1' };
  const objects = Array.from({ length: items }, (_, i) => ({ metadata: { name: `cm-${i}`, namespace: i % 2 === 0 ? 'mine' : 'theirs' }, data: { v: 'x'.repeat(i % 50) } }));
  return JSON.stringify({ kind: 'ConfigMapList', apiVersion: 'v1', metadata, items: objects });
}


describe('judgeList streams a confirmed list on as the upstream stream itself', () => {
  it('byte for byte, whatever the pieces and however late they come', async () => {
    await fc.assert(
      fc.asyncProperty(fc.nat({ max: 400 }), fc.array(fc.integer({ min: 1, max: 70_000 }), { minLength: 1, maxLength: 8 }), fc.boolean(), fc.boolean(), async (items, sizes, late, echo) => {
        const text = Buffer.from(list(items, echo));
        const source = new PassThrough();
        const writing = (async () => {
          let at = 0;
          for (let i = 0; at < text.length; i++) {
            const size = sizes[i % sizes.length]!;
            source.write(text.subarray(at, at + size));
            at += size;
            if (late) await tick();
          }
          source.end();
        })();
        let filtered = 0;
        const answer = await judgeList(source, { expected: SELECTOR, admit: (m) => m.namespace === 'mine', onFiltered: () => filtered++, sealContinue: markContinue });
        const out = await drain(answer);
        await writing;
        if (echo) {
          expect(out).toBe(text.toString());
          expect(filtered).toBe(0);
        } else {
          expect((JSON.parse(out) as { items: unknown[] }).items).toHaveLength(Math.ceil(items / 2));
          expect(filtered).toBe(1);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('hands on the stream it was given, so piping it costs no step per chunk', async () => {
    const text = list(2000, true);
    const source = Readable.from([Buffer.from(text.slice(0, 100)), Buffer.from(text.slice(100, 200_000)), Buffer.from(text.slice(200_000))]);
    const answer = await judgeList(source, { expected: SELECTOR, admit: () => true, onFiltered: () => undefined, sealContinue: markContinue });
    expect(answer).toBe(source);
    expect(await drain(answer)).toBe(text);
  });

  it('refuses an answer destroyed before its end', async () => {
    const source = new PassThrough();
    source.write('{"kind":"ConfigMapList","metadata":{},"items":[{"metadata"');
    setTimeout(() => source.destroy(), 5);
    await expect(judgeList(source, { expected: SELECTOR, admit: () => true, onFiltered: () => undefined, sealContinue: markContinue })).rejects.toThrow(/ended before its end/);
  });
});

describe('filterListBytes', () => {
  const itemArb = fc.record({
    namespace: fc.option(fc.constantFrom('mine', 'theirs', 'a"b', 'm\\ine'), { nil: undefined }),
    tier: fc.option(fc.constantFrom('web', 'db'), { nil: undefined }),
    spec: fc.jsonValue({ maxDepth: 3 }),
  });
  const listArb = fc.record({
    items: fc.array(itemArb, { maxLength: 12 }),
    remaining: fc.option(fc.nat(), { nil: undefined }),
    metadataFirst: fc.boolean(),
    table: fc.boolean(),
    indent: fc.constantFrom(undefined, 1),
  });
  const admit = (m: { namespace?: string; labels?: Readonly<Record<string, string>> }): boolean => m.namespace === 'mine' && m.labels?.tier !== 'db';

  it('keeps what filterListBody keeps, byte for byte the API server\'s items', () => {
    fc.assert(
      fc.property(listArb, (l) => {
        const items = l.items.map((i, n) => ({ metadata: { name: `cm-${n}`, ...(i.namespace ? { namespace: i.namespace } : {}), labels: i.tier ? { tier: i.tier, other: 'x' } : {} }, spec: i.spec }));
        const metadata = { resourceVersion: '5', ...(l.remaining !== undefined ? { remainingItemCount: l.remaining } : {}) };
        const list = l.table
          ? { kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata, rows: items.map((object) => ({ cells: [], object })) }
          : l.metadataFirst
            ? { kind: 'ConfigMapList', metadata, items }
            : { kind: 'ConfigMapList', items, metadata };
        const text = JSON.stringify(list, null, l.indent);
        const expected = JSON.parse(filterListBody(text, admit, markContinue)) as unknown;
        const got = filterListBytes(Buffer.from(text), admit, ['tier'], markContinue).toString();
        expect(JSON.parse(got)).toEqual(expected);
        if (!l.table && l.indent === undefined) expect(got).toBe(JSON.stringify(expected));
      }),
      { numRuns: 500 },
    );
  });

  it('refuses what filterListBody refuses', () => {
    for (const bad of ['not json', '[]', '{"kind":"List"}', '{"items":{}}', '{"items":[null]}x']) {
      expect(() => filterListBytes(Buffer.from(bad), admit, ['tier'], markContinue)).toThrow(UnjudgedListError);
    }
  });
});
