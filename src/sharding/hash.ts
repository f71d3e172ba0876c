import { labelKeyProblem } from '../api/index.js';
import { InvalidConfigError } from '../errors.js';

export const HASH_ALGORITHMS = ['kusionstack', 'fnv'] as const;
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

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;
const utf8 = new TextEncoder();

/** FNV-1a, 32 bits, over the UTF-8 bytes (ASCII names, the usual case, skip the encoder). */
export function fnv1a32(text: string): number {
  let h = FNV_OFFSET;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) return fnv1a32Bytes(utf8.encode(text));
    h = Math.imul(h ^ c, FNV_PRIME);
  }
  return h >>> 0;
}

function fnv1a32Bytes(bytes: Uint8Array): number {
  let h = FNV_OFFSET;
  for (const b of bytes) h = Math.imul(h ^ b, FNV_PRIME);
  return h >>> 0;
}

/** The bucket (0 .. bucketCount-1) of a namespace under the given settings. */
export function bucketOf(namespace: string, settings: Pick<HashSettings, 'algorithm' | 'bucketCount'>): number {
  return settings.algorithm === 'kusionstack'
    ? kusionstackBucket(namespace, settings.bucketCount)
    : fnv1a32(namespace) % settings.bucketCount;
}
