import { createHash } from 'node:crypto';
import { UnreadableBodyError } from '../../errors.js';
import { isProtobufBody, ProtobufBodyError, protobufObjectName, PROTOBUF_TYPE, withProtobufObjectName } from '../../kube/protobuf.js';
import { encodeSegment, type ResourceRequest } from '../request/parse/index.js';
import type { ObjectMetadata } from './shard-view.js';

/** The resources client-go's leader election uses as locks: Lease, ConfigMap, Endpoints. */
const LOCK_RESOURCES = new Set(['coordination.k8s.io/leases', '/configmaps', '/endpoints']);

/** The longest object name the API server takes for a lock (a DNS subdomain). */
const MAX_NAME = 253;
/** Hex digits of the shard's digest in a lock's name: what keeps two shards' locks apart whatever the truncation. */
const DIGEST_CHARS = 10;

/**
 * The name shard `shard`'s lock `original` gets on the API server: `<original>.<cluster>.<config>-<digest>`. It is a
 * DNS subdomain (a shard name's `/` is not allowed in one), at most 253 characters, the same for the same (original,
 * shard) whoever computes it, and unlike any other shard's (the digest covers both names exactly; the readable part
 * is cut, never the digest).
 */
export function shardLockName(original: string, shard: string): string {
  const readable = readableName(`${original}.${shard.replace(/\//gu, '.')}`);
  return `${readable === '' ? 'lock' : readable}-${shardDigest(original, shard)}`;
}

function shardDigest(original: string, shard: string): string {
  return createHash('sha256').update(`${original}\n${shard}`).digest('hex').slice(0, DIGEST_CHARS);
}

/** `text` as a DNS subdomain short enough for a digest to follow: lower case, labels of letters, digits and inner `-`. */
function readableName(text: string): string {
  return text
    .toLowerCase()
    .replace(/[^a-z0-9.-]+/gu, '-')
    .split('.')
    .map((label) => label.replace(/^-+|-+$/gu, ''))
    .filter((label) => label !== '')
    .join('.')
    .slice(0, MAX_NAME - DIGEST_CHARS - 1)
    .replace(/[.-]+$/u, '');
}

/** How the proxy takes a request in the operator's namespace on a lock resource. */
export type LockConcern =
  /** The lock itself, by its name in the path: renamed in path and body. */
  | 'path'
  /** A create sent to the collection: the lock if its body names it. */
  | 'body'
  /** Another shard's renamed lock, or this shard's by its renamed name: refused, so no shard reads or takes another's. */
  | 'foreign';

/**
 * Gives every shard its own leader: a lock named `<leaderElectionName>` in the operator's namespace becomes
 * {@link shardLockName} on the way to the API server (path and body, JSON or protobuf) and is named back in the
 * object the API server answers with. A Status answer is passed on as it is, naming the lock the API server saw.
 * Only there: the same name in any other namespace is an ordinary object, judged by its bucket.
 */
export class LockRenamer {
  readonly original: string;
  readonly renamed: string;
  readonly namespace: string;
  /** The names every shard's renamed lock of this name takes. */
  private readonly anyShardLock: RegExp;

  constructor(options: { leaderElectionName: string; shard: string; namespace: string }) {
    this.original = options.leaderElectionName;
    this.renamed = shardLockName(options.leaderElectionName, options.shard);
    this.namespace = options.namespace;
    const prefix = readableName(options.leaderElectionName).replace(/[.]/gu, '\\.');
    this.anyShardLock = new RegExp(`^${prefix}\\..*-[0-9a-f]{${DIGEST_CHARS}}$`, 'u');
  }

  /** Whether this request is about a lock: by its path, or (for a create) possibly by its body. */
  concerns(info: ResourceRequest): LockConcern | undefined {
    if (info.namespace !== this.namespace) return undefined;
    if (!LOCK_RESOURCES.has(`${info.group}/${info.resource}`)) return undefined;
    if (info.name !== undefined && this.anyShardLock.test(info.name)) return 'foreign';
    if (info.subresource !== undefined) return undefined;
    if (info.name === this.original) return 'path';
    // Only a create sent to the collection names its object in the body (a POST to a named path is not one).
    return info.verb === 'create' && info.name === undefined ? 'body' : undefined;
  }

  /**
   * Whether lists and watches of this resource may carry a renamed lock. Leases only: client-go's ConfigMap and Endpoints locks are gone since v0.24, and judging every ConfigMap list
   * by name would cost every operator that lists ConfigMaps the server's echo and gzip pass-through.
   */
  locksIn(group: string, resource: string): boolean {
    return group === 'coordination.k8s.io' && resource === 'leases';
  }

  /** Whether an object is a shard's renamed lock, this shard's own included. */
  hides(object: ObjectMetadata): boolean {
    return object.namespace === this.namespace && typeof object.name === 'string' && this.anyShardLock.test(object.name);
  }

  /** Replaces the lock's name, the path's last segment, keeping everything before it. */
  renamePath(path: string): string {
    return `${path.slice(0, path.lastIndexOf('/') + 1)}${encodeSegment(this.renamed)}`;
  }

  /**
   * The request body with metadata.name renamed when it names the lock (`lock`); a body naming any shard's renamed
   * lock (`foreign`: a create would squat it before its shard does) or any other object (`other`) as it came.
   * Throws UnreadableBodyError for a body the proxy cannot read with certainty: it is never forwarded.
   */
  renameBody(body: Buffer, contentType: string | undefined): { body: Buffer; object: 'lock' | 'foreign' | 'other'; name?: string } {
    if (body.length === 0) return { body, object: 'other' };
    const media = mediaOf(contentType);
    const judged = (name: unknown): 'lock' | 'foreign' | 'other' =>
      name === this.original ? 'lock' : typeof name === 'string' && this.anyShardLock.test(name) ? 'foreign' : 'other';
    if (media === 'protobuf') {
      const name = readProtobuf(() => protobufObjectName(body));
      const object = judged(name);
      return object === 'lock' ? { body: readProtobuf(() => withProtobufObjectName(body, this.renamed)), object } : { body, object, ...(name === undefined ? {} : { name }) };
    }
    if (media !== 'json') {
      throw new UnreadableBodyError(415, `a body of a lock in namespace "${this.namespace}" must be JSON or protobuf, not "${contentType ?? ''}": the proxy reads its name to give each shard its own lock`);
    }
    const parsed = parseObject(body.toString('utf8'));
    if (parsed === undefined) throw new UnreadableBodyError(400, `the body of a lock in namespace "${this.namespace}" is not a JSON object`);
    const metadata = parsed.metadata as Record<string, unknown> | undefined;
    const name = typeof metadata === 'object' && metadata !== null ? metadata.name : undefined;
    const object = judged(name);
    if (object !== 'lock' || metadata === undefined) return { body, object, ...(typeof name === 'string' ? { name } : {}) };
    metadata.name = this.renamed;
    return { body: Buffer.from(JSON.stringify(parsed)), object };
  }

  /** The refusal of a request that names a shard's renamed lock, by its path or its body. */
  foreignRefusal(resource: string, name: string): string {
    return `${resource} "${name}" in namespace "${this.namespace}" is a shard's leader-election lock: a shard reads and takes only its own, by the name "${this.original}"`;
  }

  /** The Accept sent for a lock: the client's protobuf where it takes it, else JSON; never a type the proxy cannot rename back. */
  accept(clientAccept: string | undefined): string {
    return clientAccept !== undefined && clientAccept.toLowerCase().includes(PROTOBUF_TYPE) ? `${PROTOBUF_TYPE}, application/json` : 'application/json';
  }

  /** The answer's object with the original name put back; a Status, or any object not the renamed lock, as it came. */
  restoreBody(body: Buffer): Buffer {
    if (isProtobufBody(body)) {
      try {
        return protobufObjectName(body) === this.renamed ? withProtobufObjectName(body, this.original) : body;
      } catch (err) {
        if (err instanceof ProtobufBodyError) return body;
        throw err;
      }
    }
    const object = parseObject(body.toString('utf8'));
    const metadata = object?.metadata as Record<string, unknown> | undefined;
    if (object === undefined || metadata?.name !== this.renamed) return body;
    metadata.name = this.original;
    return Buffer.from(JSON.stringify(object));
  }
}

/** The media types a lock's body may come in: JSON (of any patch kind) or protobuf. */
function mediaOf(contentType: string | undefined): 'json' | 'protobuf' | undefined {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  if (type === PROTOBUF_TYPE) return 'protobuf';
  return type === 'application/json' || /^application\/[a-z-]+\+json$/u.test(type) ? 'json' : undefined;
}

function readProtobuf<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    if (err instanceof ProtobufBodyError) throw new UnreadableBodyError(400, `the lock's ${err.message}`);
    throw err;
  }
}

function parseObject(body: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
