import { encodeSegment, type ResourceRequest } from '../request/parse/index.js';

/** The resources client-go's leader election uses as locks: Lease, ConfigMap, Endpoints. */
const LOCK_RESOURCES = new Set(['coordination.k8s.io/leases', '/configmaps', '/endpoints']);

/**
 * Gives every shard its own leader: a lock named `<leaderElectionName>` in the operator's namespace becomes
 * `<leaderElectionName>---<shard>` on the way to the API server (path and body) and is named back on the way out.
 * Only there: the same name in any other namespace is an ordinary object, judged by its bucket.
 */
export class LockRenamer {
  readonly original: string;
  readonly renamed: string;
  readonly namespace: string;
  private readonly quotedRenamed: string;

  constructor(options: { leaderElectionName: string; shard: string; namespace: string }) {
    this.original = options.leaderElectionName;
    this.renamed = `${options.leaderElectionName}---${options.shard}`;
    this.namespace = options.namespace;
    this.quotedRenamed = JSON.stringify(this.renamed);
  }

  /** Whether this request is about the lock: by its path, or (for a create) possibly by its body. */
  concerns(info: ResourceRequest): 'path' | 'body' | undefined {
    if (info.namespace !== this.namespace) return undefined;
    if (!LOCK_RESOURCES.has(`${info.group}/${info.resource}`) || info.subresource !== undefined) return undefined;
    if (info.name === this.original) return 'path';
    // Only a create sent to the collection names its object in the body (a POST to a named path is not one).
    return info.verb === 'create' && info.name === undefined ? 'body' : undefined;
  }

  /** Replaces the lock's name, the path's last segment, keeping everything before it. */
  renamePath(path: string): string {
    return `${path.slice(0, path.lastIndexOf('/') + 1)}${encodeSegment(this.renamed)}`;
  }

  /** The request body with metadata.name renamed; other bodies unchanged. */
  renameBody(body: string): string {
    const object = parseObject(body);
    const metadata = object?.metadata as Record<string, unknown> | undefined;
    if (metadata?.name !== this.original) return body;
    metadata.name = this.renamed;
    return JSON.stringify(object);
  }

  /** The response body with the renamed name put back (the object's name, or a Status' details.name). */
  restoreBody(body: string): string {
    if (!body.includes(this.quotedRenamed)) return body;
    const object = parseObject(body);
    if (object === undefined) return body;
    for (const key of ['metadata', 'details'] as const) {
      const part = object[key] as Record<string, unknown> | undefined;
      if (part?.name === this.renamed) part.name = this.original;
    }
    if (typeof object.message === 'string') object.message = object.message.split(this.renamed).join(this.original);
    return JSON.stringify(object);
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
