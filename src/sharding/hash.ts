import { labelKeyProblem } from '../api/index.js';
import { InvalidConfigError } from '../errors.js';

export const HASH_ALGORITHMS = ['kusionstack', 'fnv', 'fnv-range'] as const;
export type HashAlgorithm = (typeof HASH_ALGORITHMS)[number];

export interface ShardLabelKeys {
  /** The namespace's bucket, copied onto every object. */
  readonly hash: string;
  /** The namespace's name, copied onto every object. */
  readonly namespace: string;
  /** `"true"` while the object is under ControllerMesh's control. */
  readonly control: string;
}

/** How namespaces map to buckets and which labels carry the result: one frozen object, validated once. */
export interface HashSettings {
  readonly algorithm: HashAlgorithm;
  readonly bucketCount: number;
  readonly labels: ShardLabelKeys;
}

export const DEFAULT_LABEL_KEYS: ShardLabelKeys = Object.freeze({
  hash: 'ctrlmesh.kusionstack.io/sharding-hash',
  namespace: 'ctrlmesh.kusionstack.io/namespace',
  control: 'ctrlmesh.kusionstack.io/control',
});

export const DEFAULT_BUCKET_COUNT = 32;

export interface HashSettingsInput {
  algorithm?: HashAlgorithm;
  bucketCount?: number;
  labels?: Partial<ShardLabelKeys>;
}

/** Defaults merged (fnv, 32 buckets, KusionStack's documented label keys), checked, frozen. */
export function createHashSettings(input: HashSettingsInput = {}): HashSettings {
  const algorithm = input.algorithm ?? 'fnv';
  if (!HASH_ALGORITHMS.includes(algorithm)) {
    throw new InvalidConfigError(`hash algorithm must be one of ${HASH_ALGORITHMS.join(', ')}, not "${String(algorithm)}"`);
  }
  const bucketCount = input.bucketCount ?? DEFAULT_BUCKET_COUNT;
  if (!Number.isInteger(bucketCount) || bucketCount < 1 || bucketCount > 65536) {
    throw new InvalidConfigError(`bucket count must be a whole number from 1 to 65536, not ${String(bucketCount)}`);
  }
  const labels = { ...DEFAULT_LABEL_KEYS, ...input.labels };
  for (const [role, key] of Object.entries(labels)) {
    const problem = labelKeyProblem(key);
    if (problem) throw new InvalidConfigError(`label key for ${role}: ${problem}`);
  }
  return Object.freeze({ algorithm, bucketCount, labels: Object.freeze(labels) });
}

/** KusionStack's hash, bit for bit: h = (h*33 + code point) mod buckets, over the name's code points. */
export function kusionstackBucket(namespace: string, bucketCount: number): number {
  let h = 0;
  for (const ch of namespace) h = (h * 33 + (ch.codePointAt(0) as number)) % bucketCount;
  return h;
}

const utf8 = new TextEncoder();

/** FNV-1a, 32 bits, over the UTF-8 bytes (ASCII names, the usual case, skip the encoder). */
export function fnv1a32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) {
      h = 0x811c9dc5;
      for (const b of utf8.encode(text)) h = Math.imul(h ^ b, 0x01000193);
      return h >>> 0;
    }
    h = Math.imul(h ^ c, 0x01000193);
  }
  return h >>> 0;
}

/**
 * 64-bit FNV-1a over the UTF-8 bytes, as two 32-bit halves (numbers, not BigInt: this runs per request). It is the
 * hash Kubernetes' shard selectors apply to `object.metadata.namespace` (KEP-5866, apimachinery `pkg/sharding`).
 * The prime is 2^40 + 0x1b3, so a multiply is `h*0x1b3 + (h << 40)`, carried by hand between the halves.
 */
export function fnv1a64(text: string): { hi: number; lo: number } {
  let hi = 0xcbf29ce4;
  let lo = 0x84222325;
  const mix = (byte: number): void => {
    lo ^= byte;
    const low = (lo >>> 0) * 0x1b3;
    const carry = Math.floor(low / 0x1_0000_0000);
    hi = (Math.imul(hi, 0x1b3) + carry + ((lo << 8) >>> 0)) >>> 0;
    lo = low >>> 0;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) {
      hi = 0xcbf29ce4;
      lo = 0x84222325;
      for (const b of utf8.encode(text)) mix(b);
      return { hi, lo: lo >>> 0 };
    }
    mix(c);
  }
  return { hi, lo: lo >>> 0 };
}

/**
 * The `fnv-range` bucket: which of `bucketCount` equal slices of the 64-bit FNV-1a space the hash falls in,
 * floor(h * n / 2^64). Each bucket is then one contiguous hash range, so a shard's buckets can be sent to the API
 * server as a few `shardRange` terms (hash-ranges.ts). The price: FNV-1a's top bits hardly depend on the last
 * characters, so names that differ only at the end (`tenant-0001`, `tenant-0002`) share a bucket
 * (docs/shard-selectors.md, "Buckets are hash ranges").
 */
export function fnvBucket(namespace: string, bucketCount: number): number {
  const { hi, lo } = fnv1a64(namespace);
  // hi*n and lo*n stay below 2^48, exact in a double; the floor of the sum over 2^64 nests as below.
  return Math.floor((hi * bucketCount + Math.floor((lo * bucketCount) / 0x1_0000_0000)) / 0x1_0000_0000);
}

/** The bucket (0 .. bucketCount-1) of a namespace under the given settings. */
export function bucketOf(namespace: string, settings: Pick<HashSettings, 'algorithm' | 'bucketCount'>): number {
  switch (settings.algorithm) {
    case 'kusionstack':
      return kusionstackBucket(namespace, settings.bucketCount);
    case 'fnv':
      return fnv1a32(namespace) % settings.bucketCount;
    case 'fnv-range':
      return fnvBucket(namespace, settings.bucketCount);
  }
}
