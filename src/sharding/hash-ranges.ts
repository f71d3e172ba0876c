import { fnv1a64 } from './hash.js';

/**
 * Sets of 64-bit hash values as sorted, disjoint, non-adjacent half-open ranges [start, end): the form a Kubernetes
 * shard selector (KEP-5866) takes. Built once per route table, so BigInt is fine here.
 */
export type HashRange = readonly [start: bigint, end: bigint];
export type HashRanges = readonly HashRange[];

export const HASH_SPACE_END = 1n << 64n;

/** The field the proxy shards by: the object's namespace (a Namespace object has none: it hashes as ""). */
export const NAMESPACE_FIELD = 'object.metadata.namespace';

/** The field objects sharded one by one are hashed by (`spec.objectSharding`). */
export const UID_FIELD = 'object.metadata.uid';

/** The hash of a namespace name as one number. */
export function namespaceHash(namespace: string): bigint {
  const { hi, lo } = fnv1a64(namespace);
  return (BigInt(hi) << 32n) | BigInt(lo);
}

/** Bucket b of n: [ceil(b * 2^64 / n), ceil((b+1) * 2^64 / n)), exactly the hashes `fnvBucket` maps to b. */
export function bucketRange(bucket: number, bucketCount: number): HashRange {
  const n = BigInt(bucketCount);
  const at = (b: number): bigint => (BigInt(b) * HASH_SPACE_END + n - 1n) / n;
  return [at(bucket), at(bucket + 1)];
}

/** Sorts and merges overlapping or touching ranges, dropping empty ones. */
export function normalizeRanges(ranges: readonly HashRange[]): HashRanges {
  const sorted = ranges.filter(([s, e]) => s < e).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const out: [bigint, bigint][] = [];
  for (const [s, e] of sorted) {
    const last = out[out.length - 1];
    if (last !== undefined && s <= last[1]) {
      if (e > last[1]) last[1] = e;
    } else {
      out.push([s, e]);
    }
  }
  return out;
}

/** The ranges of a set of fnv buckets, adjacent buckets merged into one range. */
export function rangesOfBuckets(buckets: Iterable<number>, bucketCount: number): HashRanges {
  return normalizeRanges([...buckets].map((b) => bucketRange(b, bucketCount)));
}

/** Only the given hashes (one-hash-wide ranges) that fall inside `ranges`. */
export function keepPoints(ranges: HashRanges, points: Iterable<bigint>): HashRanges {
  const inside = [...points].filter((p) => ranges.some(([s, e]) => s <= p && p < e));
  return normalizeRanges(inside.map((p) => [p, p + 1n] as const));
}

/** `ranges` without the given hashes. */
export function removePoints(ranges: HashRanges, points: Iterable<bigint>): HashRanges {
  let out: HashRange[] = [...ranges];
  for (const p of points) {
    out = out.flatMap(([s, e]) => (p < s || p >= e ? [[s, e] as const] : [[s, p] as const, [p + 1n, e] as const]));
  }
  return normalizeRanges(out);
}

function hexBound(value: bigint): string {
  return value === HASH_SPACE_END ? '0x10000000000000000' : `0x${value.toString(16).padStart(16, '0')}`;
}

/**
 * The selector text in the API server's own spelling (terms in order, `shardRange(<field>, '<start>', '<end>')`
 * joined by ` || `), so the `metadata.shardInfo.selector` it echoes is this very string. Empty ranges have no
 * selector: the caller must make the request match nothing some other way.
 */
export function renderShardSelector(field: string, ranges: HashRanges): string {
  if (ranges.length === 0) throw new RangeError('an empty set of hash ranges has no shard selector');
  return ranges.map(([s, e]) => `shardRange(${field}, '${hexBound(s)}', '${hexBound(e)}')`).join(' || ');
}
