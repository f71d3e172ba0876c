import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidConfigError } from '../../../src/errors.js';
import {
  bucketOf,
  bucketRange,
  createHashSettings,
  fnv1a32,
  fnv1a64,
  fnvBucket,
  kusionstackBucket,
  namespaceHash,
  rangesOfBuckets,
  removePoints,
  keepPoints,
  renderShardSelector,
  NAMESPACE_FIELD,
} from '../../../src/sharding/index.js';

/** The definition, in BigInt: the reference the fast halves are checked against. */
function referenceFnv64(text: string): bigint {
  let h = 0xcbf29ce484222325n;
  for (const b of new TextEncoder().encode(text)) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
  return h;
}

describe('kusionstack hash', () => {
  it.each([
    ['default', 5],
    ['ns-a', 15],
    ['ns-b', 16],
    ['ctrlmesh', 2],
    ['kube-system', 25],
    ['demo-0a', 3],
  ])('%s -> %i (the original\'s vectors)', (ns, bucket) => {
    expect(kusionstackBucket(ns, 32)).toBe(bucket);
    expect(bucketOf(ns, createHashSettings({ algorithm: 'kusionstack' }))).toBe(bucket);
  });
  it('is the sum of code points mod 32 (33 = 1 mod 32), so anagrams collide', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), (s) => {
        const sum = [...s].reduce((acc, ch) => acc + (ch.codePointAt(0) as number), 0);
        expect(kusionstackBucket(s, 32)).toBe(sum % 32);
      }),
    );
  });
});

describe('fnv hash', () => {
  it('is FNV-1a 32-bit, modulo the bucket count', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
    expect(fnv1a32('é')).toBe(fnv1a32('é'));
    expect(bucketOf('foobar', { algorithm: 'fnv', bucketCount: 32 })).toBe(0xbf9cf968 % 32);
  });
  it('spreads names that differ only at the end, where fnv-range groups them (why fnv stays the default)', () => {
    const tenants = Array.from({ length: 200 }, (_, i) => `ns-${i}`);
    const used = (algorithm: 'fnv' | 'fnv-range'): number => new Set(tenants.map((n) => bucketOf(n, { algorithm, bucketCount: 32 }))).size;
    expect(used('fnv')).toBe(32);
    expect(used('fnv-range')).toBeLessThanOrEqual(4);
  });
});

describe('fnv-range hash', () => {
  it('is FNV-1a 64-bit, as the API server computes it (vectors measured on v1.37)', () => {
    expect(namespaceHash('')).toBe(0xcbf29ce484222325n);
    expect(namespaceHash('a')).toBe(0xaf63dc4c8601ec8cn);
    expect(namespaceHash('foobar')).toBe(0x85944171f73967e8n);
    expect(namespaceHash('kube-system')).toBe(0xdf65c7bc1d82b35en);
    expect(namespaceHash('default')).toBe(0xebada5168620c5fen);
    expect(namespaceHash('kube-node-lease')).toBe(0x021fb6dd71b80174n);
  });
  it('agrees with the BigInt definition on any text, UTF-8 included', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (s) => {
        const { hi, lo } = fnv1a64(s);
        expect((BigInt(hi) << 32n) | BigInt(lo)).toBe(referenceFnv64(s));
      }),
    );
  });
  it('cuts the 64-bit space into equal slices: bucket b of n is floor(h * n / 2^64), inside bucketRange(b, n)', () => {
    fc.assert(
      fc.property(fc.string(), fc.integer({ min: 1, max: 65536 }), (s, n) => {
        const h = referenceFnv64(s);
        const b = fnvBucket(s, n);
        expect(BigInt(b)).toBe((h * BigInt(n)) >> 64n);
        const [start, end] = bucketRange(b, n);
        expect(start <= h && h < end).toBe(true);
      }),
    );
  });
  it('tiles the space with the buckets of any count', () => {
    for (const n of [1, 3, 7, 32, 1000]) {
      expect(bucketRange(0, n)[0]).toBe(0n);
      expect(bucketRange(n - 1, n)[1]).toBe(1n << 64n);
      for (let b = 1; b < n; b++) expect(bucketRange(b, n)[0]).toBe(bucketRange(b - 1, n)[1]);
    }
  });
  it('puts every name in range for any bucket count', () => {
    fc.assert(
      fc.property(fc.string(), fc.integer({ min: 1, max: 1000 }), fc.constantFrom('fnv' as const, 'fnv-range' as const, 'kusionstack' as const), (s, n, algorithm) => {
        const b = bucketOf(s, { algorithm, bucketCount: n });
        expect(Number.isInteger(b) && b >= 0 && b < n).toBe(true);
      }),
    );
  });
});

describe('hash ranges', () => {
  it('merge adjacent buckets and render in the API server\'s spelling', () => {
    expect(renderShardSelector(NAMESPACE_FIELD, rangesOfBuckets([3, 0, 1, 31], 32))).toBe(
      "shardRange(object.metadata.namespace, '0x0000000000000000', '0x1000000000000000') || " +
        "shardRange(object.metadata.namespace, '0x1800000000000000', '0x2000000000000000') || " +
        "shardRange(object.metadata.namespace, '0xf800000000000000', '0x10000000000000000')",
    );
    expect(rangesOfBuckets([...Array(32).keys()], 32)).toEqual([[0n, 1n << 64n]]);
  });
  it('keep or remove single hashes (a namespace named by a limit)', () => {
    const ranges = rangesOfBuckets([0], 2);
    expect(keepPoints(ranges, [5n, 1n << 63n])).toEqual([[5n, 6n]]);
    expect(removePoints(ranges, [0n, 5n])).toEqual([[1n, 5n], [6n, 1n << 63n]]);
  });
  it('have no selector when empty', () => {
    expect(() => renderShardSelector(NAMESPACE_FIELD, [])).toThrow(RangeError);
  });
});

describe('createHashSettings', () => {
  it('defaults to fnv, 32 buckets and the documented label keys, frozen', () => {
    const s = createHashSettings();
    expect(s).toEqual({
      algorithm: 'fnv',
      bucketCount: 32,
      labels: {
        hash: 'ctrlmesh.kusionstack.io/sharding-hash',
        namespace: 'ctrlmesh.kusionstack.io/namespace',
        control: 'ctrlmesh.kusionstack.io/control',
      },
    });
    expect(Object.isFrozen(s) && Object.isFrozen(s.labels)).toBe(true);
  });
  it('takes KusionStack\'s code default label key as an override', () => {
    expect(createHashSettings({ labels: { hash: 'ctrlmesh.kusionstack.io/shard-hash' } }).labels.hash).toBe('ctrlmesh.kusionstack.io/shard-hash');
  });
  it.each([
    [{ bucketCount: 0 }, 'bucket count'],
    [{ bucketCount: 2.5 }, 'bucket count'],
    [{ algorithm: 'md5' as never }, 'hash algorithm'],
    [{ labels: { control: 'bad key!' } }, 'label key for control'],
  ])('refuses %j', (input, message) => {
    expect(() => createHashSettings(input)).toThrow(InvalidConfigError);
    expect(() => createHashSettings(input)).toThrow(message);
  });
});
