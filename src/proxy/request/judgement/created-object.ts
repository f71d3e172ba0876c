import { isProtobufBody, ProtobufBodyError, protobufString } from '../../../kube/protobuf.js';
import type { ObjectMetadata } from '../../routes/shard-view.js';
import type { ResourceRequest } from '../parse/index.js';
import { isJson, refuse, type Judgement, type Plan } from './judge.js';
import { statusBody, statusFor } from './status.js';

/** A Secret of this type makes the API server's token controller mint a token for the ServiceAccount it names. */
const TOKEN_SECRET_TYPE = 'kubernetes.io/service-account-token';

/** What a create's body says of the object it makes. */
interface Created {
  metadata: ObjectMetadata & { generateName?: string };
  /** A Secret's `type`. */
  type?: string;
}

/** Field numbers in Kubernetes' protobuf: ObjectMeta's name and generateName, a Secret's type. */
const PROTOBUF_NAME = [1, 1];
const PROTOBUF_GENERATE_NAME = [1, 2];
const PROTOBUF_SECRET_TYPE = [3];

function text(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

/** The body's object as the API server will read it, or why it cannot be read with certainty. */
function readCreated(body: Buffer, contentType: string | undefined, protobuf: boolean): Created | string {
  if (protobuf && contentType?.startsWith('application/vnd.kubernetes.protobuf') === true && isProtobufBody(body)) {
    try {
      const name = protobufString(body, PROTOBUF_NAME);
      const generateName = protobufString(body, PROTOBUF_GENERATE_NAME);
      const type = protobufString(body, PROTOBUF_SECRET_TYPE);
      return { metadata: { ...(name === undefined ? {} : { name }), ...(generateName === undefined ? {} : { generateName }) }, ...(type === undefined ? {} : { type }) };
    } catch (err) {
      if (err instanceof ProtobufBodyError) return err.message;
      throw err;
    }
  }
  if (!isJson(contentType)) return protobuf ? 'it is neither JSON nor Kubernetes protobuf' : 'it is not JSON';
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return 'it is not JSON';
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return 'it is not a JSON object';
  const object = parsed as { metadata?: unknown; type?: unknown };
  const meta = object.metadata;
  if (meta !== undefined && (meta === null || typeof meta !== 'object' || Array.isArray(meta))) return 'its metadata is not an object';
  const m = (meta ?? {}) as { name?: unknown; generateName?: unknown; labels?: unknown };
  const labels = m.labels;
  if (labels !== undefined && labels !== null && (typeof labels !== 'object' || Array.isArray(labels) || Object.values(labels).some((v) => typeof v !== 'string'))) {
    return 'its labels are not a map of strings';
  }
  const name = text(m.name);
  const generateName = text(m.generateName);
  const type = text(object.type);
  return {
    metadata: {
      ...(name === undefined ? {} : { name }),
      ...(generateName === undefined ? {} : { generateName }),
      ...(labels === undefined || labels === null ? {} : { labels: labels as Record<string, string> }),
    },
    ...(type === undefined ? {} : { type }),
  };
}

function forbidden(plan: Plan, info: ResourceRequest, message: string): Judgement {
  return refuse(plan, statusBody(403, 'Forbidden', message, { group: info.group, kind: info.resource }));
}

/**
 * A create judged by the object in its body, forwarded as it was read: a Secret (anywhere: no token Secret, which
 * would have the API server mint a ServiceAccount token; in the operator's namespace, no name of the mesh's
 * credentials) and an object outside namespaces of a custom resource (its labels must put it in one of the shard's
 * buckets, as its list would show it). Only JSON is read, and protobuf for Secrets (client-go's default for
 * built-in kinds); anything else is refused with 415 (test/unit/proxy/created-object.test.ts).
 */
export function judgeCreated(plan: Plan, body: Buffer, contentType: string | undefined): Judgement {
  const { info, state, entry } = plan;
  if (info.kind !== 'resource') return plan;
  const secret = info.group === '' && info.resource === 'secrets';
  const created = readCreated(body, contentType, secret);
  if (typeof created === 'string') {
    return refuse(plan, statusFor(415, `the proxy reads the object a create of ${info.resource} makes to judge it, and cannot: ${created}`));
  }
  const forwarded: Plan = { ...plan, body };
  if (secret) {
    if (created.type === TOKEN_SECRET_TYPE) {
      return forbidden(plan, info, `a Secret of type ${TOKEN_SECRET_TYPE} has the API server mint a ServiceAccount token, which works without the proxy: refused`);
    }
    const { name, generateName } = created.metadata;
    if (info.namespace === state.mesh.namespace && [name, generateName].some((n) => n !== undefined && state.mesh.isMeshSecretName(n))) {
      return forbidden(plan, info, `Secret "${name ?? generateName ?? ''}" in the operator's namespace "${state.mesh.namespace}" would take the name of the mesh's credentials: refused`);
    }
    return forwarded;
  }
  // Outside namespaces: the API server clears any namespace a body gives, so the object is judged without one.
  if (!entry.view.admits(info.group, info.resource, { ...(created.metadata.labels ? { labels: created.metadata.labels } : {}), ...(created.metadata.name ? { name: created.metadata.name } : {}) })) {
    return forbidden(plan, info, `${info.resource}.${info.group} "${created.metadata.name ?? created.metadata.generateName ?? ''}" outside namespaces: its labels put it in no bucket of shard "${state.table.shard}": create refused`);
  }
  return forwarded;
}
