import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidConfigError } from '../../../src/errors.js';
import { bucketOf, createHashSettings, fnv1a32, kusionstackBucket } from '../../../src/sharding/index.js';

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
  it('is FNV-1a 32-bit', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
    expect(fnv1a32('é')).toBe(fnv1a32('é'));
  });
  it('puts every name in range for any bucket count', () => {
    fc.assert(
      fc.property(fc.string(), fc.integer({ min: 1, max: 1000 }), fc.constantFrom('fnv' as const, 'kusionstack' as const), (s, n, algorithm) => {
        const b = bucketOf(s, { algorithm, bucketCount: n });
        expect(Number.isInteger(b) && b >= 0 && b < n).toBe(true);
      }),
    );
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
