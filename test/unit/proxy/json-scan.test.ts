import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EventScanner, MAX_DEPTH, type ScannedEvent } from '../../../src/proxy/request/answer/json-scan.js';

const HASH = 'ctrlmesh.kusionstack.io/sharding-hash';
const KEYS = [HASH, 'tier'];
const scanner = new EventScanner(KEYS);
const scan = (text: string): ScannedEvent | undefined => scanner.scan(Buffer.from(text, 'utf8'));

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * What the scanner must answer, from JSON.parse: the fields it reads, or 'unsure' where a field it reads has a type
 * it does not take (the caller then parses the line, as before).
 */
function reference(text: string, keys: readonly string[]): ScannedEvent | 'unsure' {
  const event: unknown = JSON.parse(text);
  if (!isObject(event)) return 'unsure';
  const out: ScannedEvent = { type: undefined, hasObject: false, kind: undefined, apiVersion: undefined, metadata: undefined };
  const str = (v: unknown): string | undefined => {
    if (v === undefined) return undefined;
    if (typeof v !== 'string') throw new Error('unsure');
    return v;
  };
  try {
    out.type = Object.hasOwn(event, 'type') ? str(event.type) : undefined;
    if (Object.hasOwn(event, 'object')) {
      const object = event.object;
      if (!isObject(object)) return 'unsure';
      out.hasObject = true;
      out.kind = Object.hasOwn(object, 'kind') ? str(object.kind) : undefined;
      out.apiVersion = Object.hasOwn(object, 'apiVersion') ? str(object.apiVersion) : undefined;
      if (Object.hasOwn(object, 'metadata')) {
        const m = object.metadata;
        if (!isObject(m)) return 'unsure';
        const metadata: NonNullable<ScannedEvent['metadata']> = {};
        for (const field of ['namespace', 'name', 'uid', 'resourceVersion'] as const) {
          if (Object.hasOwn(m, field)) metadata[field] = str(m[field]);
        }
        if (Object.hasOwn(m, 'labels')) {
          const labels = m.labels;
          if (!isObject(labels)) return 'unsure';
          metadata.labels = {};
          for (const key of keys) if (Object.hasOwn(labels, key)) metadata.labels[key] = str(labels[key])!;
        }
        out.metadata = metadata;
      }
    }
  } catch {
    return 'unsure';
  }
  return out;
}

// Strings that try to look like structure: quotes, backslashes, the keys the scanner reads, unicode.
const tricky = fc.oneof(
  fc.string(),
  fc.string({ unit: fc.constantFrom('"', '\\', '{', '}', '[', ']', ':', ',', 'a', ' ', 'é', '😀', '\n', '\u0000') }),
  fc.constantFrom('"namespace":"victim"', '\\"', '\\\\', '"}],"metadata":{"namespace":"x"}', `${'\\'.repeat(33)}"`, 'x'.repeat(40) + '\\"' + 'y'.repeat(40)),
);
const distractor: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    tricky,
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.oneof(tricky, fc.constantFrom('namespace', 'metadata', 'labels', 'type', 'object', 'kind', HASH)), tie('value'), { maxKeys: 4 }),
  ),
})).value;

/** Shuffles an object's keys (any order is valid), keeping values. */
function shuffled<T extends Record<string, unknown>>(object: T, order: number[]): T {
  const keys = Object.keys(object);
  const sorted = keys.map((k, i) => [k, order[i % Math.max(order.length, 1)] ?? i] as const).sort((a, b) => a[1] - b[1]);
  return Object.fromEntries(sorted.map(([k]) => [k, object[k]])) as T;
}

const maybe = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> => fc.option(arb, { nil: undefined });
const labelValue = fc.oneof(fc.constantFrom('0', '7', '31', '01', ''), fc.string());
const eventArb = fc.record({
  type: maybe(fc.oneof(fc.constantFrom('ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK', 'ERROR'), tricky)),
  kind: maybe(fc.constantFrom('ConfigMap', 'Table', 'Pod')),
  apiVersion: maybe(fc.constantFrom('v1', 'apps/v1')),
  namespace: maybe(tricky),
  name: maybe(tricky),
  uid: maybe(fc.uuid()),
  resourceVersion: maybe(fc.stringMatching(/^[0-9]{1,8}$/)),
  labels: maybe(fc.dictionary(fc.oneof(fc.constantFrom(HASH, 'tier', 'app'), tricky), labelValue, { maxKeys: 5 })),
  annotations: maybe(fc.dictionary(tricky, tricky, { maxKeys: 3 })),
  spec: maybe(distractor),
  extraTop: maybe(distractor),
  order: fc.array(fc.nat(), { minLength: 1, maxLength: 8 }),
  indent: fc.constantFrom(undefined, 0, 1, '\t'),
});

type GeneratedEvent = typeof eventArb extends fc.Arbitrary<infer T> ? T : never;

function render(e: GeneratedEvent): string {
  const defined = (o: Record<string, unknown>): Record<string, unknown> => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
  const metadata = shuffled(defined({ name: e.name, namespace: e.namespace, uid: e.uid, resourceVersion: e.resourceVersion, labels: e.labels, annotations: e.annotations }), e.order);
  const object = shuffled(defined({ kind: e.kind, apiVersion: e.apiVersion, spec: e.spec, metadata, data: e.spec }), e.order.slice().reverse());
  const event = shuffled(defined({ type: e.type, object, extra: e.extraTop }), e.order);
  return JSON.stringify(event, null, e.indent);
}

describe('EventScanner', () => {
  it('reads what JSON.parse reads, on generated events with values and fields built to mislead it', () => {
    fc.assert(
      fc.property(eventArb, (e) => {
        const text = render(e);
        const expected = reference(text, KEYS);
        const got = scan(text);
        if (expected === 'unsure') expect(got).toBeUndefined();
        // Unsure only where a key it reads is written with an escape (JSON.stringify escapes `"`, `\` and controls).
        else if (got === undefined) expect(text).toMatch(/\\/);
        else expect(got).toEqual(expected);
      }),
      { numRuns: 3000 },
    );
  });

  it('reads every plainly written event (no escapes in the keys it reads)', () => {
    fc.assert(
      fc.property(eventArb, (e) => {
        const plain = { ...e, labels: e.labels && Object.fromEntries(Object.entries(e.labels).filter(([k]) => !/["\\\u0000-\u001f]/u.test(k))) };
        const text = render(plain);
        const expected = reference(text, KEYS);
        if (expected !== 'unsure') expect(scan(text)).toEqual(expected);
      }),
      { numRuns: 2000 },
    );
  });

  it('agrees with JSON.parse on arbitrary JSON as the object, and gives up on what is no object', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), (object, metadata) => {
        for (const text of [JSON.stringify(object), JSON.stringify({ type: 'ADDED', object }), JSON.stringify({ type: 'ADDED', object: { metadata } })]) {
          const expected = reference(text, KEYS);
          const got = scan(text);
          if (expected === 'unsure') expect(got).toBeUndefined();
          else if (got !== undefined) expect(got).toEqual(expected);
          else expect(text).toMatch(/\\/);
        }
      }),
      { numRuns: 1000 },
    );
  });

  it('gives up on any truncated event', () => {
    fc.assert(
      fc.property(eventArb, fc.nat(), (e, at) => {
        const text = render({ ...e, indent: undefined });
        const cut = text.slice(0, at % text.length);
        expect(scan(cut)).toBeUndefined();
      }),
      { numRuns: 1000 },
    );
  });

  const line = (metadata: string, rest = '"spec":{}'): string => `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1",${rest},"metadata":${metadata}}}\n`;

  it('is not fooled by strings or fields that spell the keys it reads', () => {
    // A string value holding `"namespace":"victim"`, after escaped quotes and backslash runs, short and long.
    for (const raw of ['"namespace":"victim"', 'a"},"namespace":"victim', `${'x'.repeat(50)}"namespace":"victim"`, '\\', '\\'.repeat(40), `${'\\'.repeat(33)}"},"namespace":"v`]) {
      const value = JSON.stringify(raw);
      const text = line(`{"name":"a","annotations":{"k":${value}},"namespace":"mine"}`, `"spec":{"namespace":"victim","s":${value}}`);
      expect(JSON.parse(text).object.metadata.namespace).toBe('mine');
      expect(scan(text)?.metadata?.namespace).toBe('mine');
    }
    // Fields of the same name at other depths: spec.metadata, a list of objects with namespaces.
    const nested = line('{"namespace":"mine","labels":{"tier":"web"}}', '"spec":{"metadata":{"namespace":"victim","labels":{"tier":"evil"}},"items":[{"namespace":"v"},["namespace"]]}');
    expect(scan(nested)?.metadata).toEqual({ namespace: 'mine', labels: { tier: 'web' } });
    // Keys in any order: type last, metadata first.
    expect(scan('{"object":{"metadata":{"namespace":"n"},"kind":"Pod"},"type":"MODIFIED"}')).toEqual({
      type: 'MODIFIED',
      hasObject: true,
      kind: 'Pod',
      apiVersion: undefined,
      metadata: { namespace: 'n' },
    });
  });

  it('gives up on duplicates and escaped keys it reads, decodes escaped values', () => {
    expect(scan(line('{"namespace":"a","namespace":"b"}'))).toBeUndefined();
    expect(scan(line('{"namespace":"a"}', '"metadata":{"namespace":"b"}'))).toBeUndefined();
    expect(scan('{"type":"ADDED","type":"DELETED","object":{}}')).toBeUndefined();
    expect(scan(line(`{"labels":{"${HASH}":"1","${HASH}":"2"}}`))).toBeUndefined();
    // A duplicate of a label it does not read does not matter.
    expect(scan(line('{"labels":{"app":"1","app":"2"}}'))?.metadata?.labels).toEqual({});
    expect(scan(line('{"n\\u0061mespace":"victim","namespace":"mine"}'))).toBeUndefined();
    expect(scan('{"typ\\u0065":"ADDED","object":{}}')).toBeUndefined();
    expect(scan(line('{"namespace":"a\\u0062\\n\\"c"}'))?.metadata?.namespace).toBe('ab\n"c');
    expect(scan(line('{"namespace":"é😀"}'))?.metadata?.namespace).toBe('é😀');
    // An escape JSON.parse refuses, in a value it reads.
    expect(scan(line('{"namespace":"a\\x"}'))).toBeUndefined();
  });

  it('gives up on types it does not take, malformed JSON and deep nesting', () => {
    for (const metadata of ['null', '[]', '"x"', '{"namespace":5}', '{"labels":null}', `{"labels":{"${HASH}":1}}`, '{"uid":true}']) {
      expect(scan(line(metadata))).toBeUndefined();
    }
    expect(scan('{"type":"ADDED","object":null}')).toBeUndefined();
    expect(scan('{"type":1,"object":{}}')).toBeUndefined();
    for (const bad of ['', '[]', 'null', '{', '{"type":"ADDED"', '{"type":"ADDED"}{}', '{"type":"ADDED",}', '{"a":01}', '{"a":1.}', '{"a":-}', '{"a":tru}', '{"a" 1}', '{"a":[1,]}', '{"a":"x}', '\uFEFF{}']) {
      expect(scan(bad), bad).toBeUndefined();
    }
    expect(scan('{"a":-0.5e+10,"b":[true,false,null,{}],"c":1E3}')).toEqual({ type: undefined, hasObject: false, kind: undefined, apiVersion: undefined, metadata: undefined });
    const deep = `{"type":"ADDED","object":{"spec":${'['.repeat(MAX_DEPTH + 10)}${']'.repeat(MAX_DEPTH + 10)},"metadata":{}}}`;
    expect(() => JSON.parse(deep)).not.toThrow();
    expect(scan(deep)).toBeUndefined();
    expect(scan(' \t{"type" : "ADDED" , "object" : { "metadata" : { "namespace" : "n" } } }\r\n')?.metadata).toEqual({ namespace: 'n' });
  });

  it('reads Tables as any object (the filter parses them) and never keys it was not asked for', () => {
    const table = '{"type":"ADDED","object":{"kind":"Table","apiVersion":"meta.k8s.io/v1","rows":[{"object":{"metadata":{"namespace":"x"}}}]}}';
    expect(scan(table)?.kind).toBe('Table');
    expect(new EventScanner([]).scan(Buffer.from(line(`{"labels":{"${HASH}":"1"}}`)))?.metadata?.labels).toEqual({});
    // Keys that cannot be compared as bytes: never sure.
    expect(new EventScanner(['é']).scan(Buffer.from(line('{}')))).toBeUndefined();
    expect(new EventScanner(['__proto__']).scan(Buffer.from(line('{}')))).toBeUndefined();
  });
});
