import type { Logger } from 'pino';
import type { ClusterEntry } from '../../routes/route-state.js';
import type { ObjectMetadata } from '../../routes/shard-view.js';
import { readBoundedBody, type ResourceRequest } from '../parse/index.js';
import { statusBody, statusFor, type KubeStatus } from './status.js';
import { labelsAfter } from './labels-after.js';
import { withUidPrecondition } from './uid-precondition.js';
import { refuse, type Judgement, type Plan } from './judge.js';

/** The most of one object's answer the proxy reads to judge it (the API server's own object limit is lower). */
export const OBJECT_MAX_BYTES = 16 * 1024 * 1024;

interface ObjectBody {
  metadata?: ObjectMetadata;
  kind?: unknown;
  rows?: { object?: { metadata?: ObjectMetadata } }[];
}

/** The metadata of an object answer (a Table of one row included), or undefined for anything else. */
export function metadataOf(text: string): ObjectMetadata | undefined {
  let body: ObjectBody;
  try {
    body = JSON.parse(text) as ObjectBody;
  } catch {
    return undefined;
  }
  if (body === null || typeof body !== 'object') return undefined;
  if (body.kind === 'Table') return body.rows?.length === 1 ? body.rows[0]?.object?.metadata : undefined;
  return body.metadata;
}

/** The object's own path (a subresource's object), as the proxy's read before a write asks for it. */
export function objectPath(info: ResourceRequest): string {
  const base = info.group === '' ? `/api/${info.version}` : `/apis/${info.group}/${info.version}`;
  const scope = info.namespace === undefined ? '' : `/namespaces/${encodeURIComponent(info.namespace)}`;
  return `${base}${scope}/${info.resource}/${encodeURIComponent(info.name ?? '')}`;
}

function describe(info: ResourceRequest, view: ClusterEntry['view']): string {
  const what = info.group === '' ? info.resource : `${info.resource}.${info.group}`;
  return `${what} "${info.name ?? ''}"${info.namespace === undefined ? '' : ` in namespace "${info.namespace}"`} of cluster "${view.name}"`;
}

export function notServed(info: ResourceRequest, entry: ClusterEntry, shard: string): KubeStatus {
  const details = { ...(info.name === undefined ? {} : { name: info.name }), group: info.group, kind: info.resource };
  return statusBody(404, 'NotFound', `${describe(info, entry.view)} is not served by shard "${shard}"`, details);
}

/**
 * A write to one object judged by what it is (sharded by uid, or outside namespaces and judged by its labels): the
 * proxy reads the object with its own identity, judges it, and forwards the client's body with that uid as a precondition, so the API server executes it only
 * on the object judged. Resolves to the body to forward, or the Status to answer instead.
 */
async function judgeObjectWrite(options: {
  entry: ClusterEntry;
  info: ResourceRequest & { verb: 'update' | 'patch' | 'delete' };
  shard: string;
  contentType: string | undefined;
  body: string;
}): Promise<{ body: string; contentType: string } | KubeStatus> {
  const { entry, info, shard } = options;
  const { upstream } = entry;
  const res = await upstream.pool.request({
    method: 'GET',
    path: upstream.upstreamPath(objectPath(info)),
    headers: { accept: 'application/json', ...(upstream.authorization === undefined ? {} : { authorization: upstream.authorization }) },
  });
  if (res.statusCode !== 200) {
    await res.body.dump();
    // No object, no uid: a write to it cannot be judged (an update that would create it included).
    if (res.statusCode === 404) return notServed(info, entry, shard);
    return statusFor(503, `the proxy reads an object sharded by uid before writing it, and the API server answered ${res.statusCode}; retry`);
  }
  const metadata = metadataOf(await readBoundedBody(res.body, OBJECT_MAX_BYTES));
  const { uid, resourceVersion } = metadata ?? {};
  if (metadata === undefined || typeof uid !== 'string' || uid === '' || typeof resourceVersion !== 'string' || resourceVersion === '') {
    return statusFor(503, 'the object read before the write carries no uid or resourceVersion; retry');
  }
  if (!entry.view.admits(info.group, info.resource, metadata)) {
    const { view } = entry;
    // Sharded by uid: the uid's bucket names its owner. Outside namespaces: its labels put it in no bucket of this shard.
    const bucket = view.shardsByObject(info.group, info.resource) ? view.objectBucketOf(uid) : undefined;
    const owner = bucket === undefined ? undefined : view.ownerOf(bucket);
    const unit = bucket === undefined ? '' : ` (uid bucket ${bucket})`;
    return statusBody(
      403,
      'Forbidden',
      `${describe(info, view)}${unit} belongs to ${owner === undefined ? 'another shard' : `shard "${owner}"`}, not to shard "${shard}": write refused`,
      { ...(info.name === undefined ? {} : { name: info.name }), group: info.group, kind: info.resource },
    );
  }
  // An object whose labels are its bucket must stay in the shard's buckets: a write is judged by where it leaves it too.
  if (info.verb !== 'delete' && !entry.view.shardsByObject(info.group, info.resource)) {
    const after = labelsAfter(info.verb, options.contentType, options.body, metadata.labels ?? {});
    if (after === undefined) {
      return statusFor(400, `the proxy judges where a write leaves ${describe(info, entry.view)} by its labels, and cannot tell them from this ${info.verb}: send the labels as a JSON object of strings`);
    }
    if (!entry.view.admits(info.group, info.resource, { ...metadata, labels: after })) {
      return statusBody(403, 'Forbidden', `${describe(info, entry.view)}: the ${info.verb} would leave it outside the buckets of shard "${shard}": write refused`, {
        ...(info.name === undefined ? {} : { name: info.name }),
        group: info.group,
        kind: info.resource,
      });
    }
  }
  const judged = withUidPrecondition(info.verb, options.contentType, options.body, { uid, resourceVersion });
  return 'code' in judged ? statusFor(judged.code, judged.message) : judged;
}

/**
 * Finishes the judgement of a write to an object sharded by uid (`plan.objectWrite`): reads the object, judges its
 * uid, and plans the client's body with the uid as a precondition. An object the proxy could not read is refused with
 * 503, which the client retries.
 */
export async function judgeWriteByObject(plan: Plan, body: Buffer, contentType: string | undefined, logger: Logger): Promise<Judgement> {
  const info = plan.objectWrite;
  if (info === undefined) return plan;
  let judged: Awaited<ReturnType<typeof judgeObjectWrite>>;
  try {
    judged = await judgeObjectWrite({ entry: plan.entry, info, shard: plan.state.table.shard, contentType, body: body.toString('utf8') });
  } catch (err) {
    logger.warn({ err, cluster: plan.cluster }, 'could not read an object sharded by uid before writing it');
    return refuse(plan, statusFor(503, `cluster "${plan.cluster}": the proxy could not read the object to judge this write: ${(err as Error).message}`));
  }
  if ('kind' in judged) return refuse(plan, judged);
  return { ...plan, objectWrite: undefined, body: judged.body, contentType: judged.contentType };
}
