import { UnreadableBodyError } from '../../../errors.js';
import type { ClusterEntry, RouteState } from '../../routes/route-state.js';
import type { ResourceSelection } from '../../routes/shard-view.js';
import { isRefusal, parseApiRequest, type QueryParams, type RequestInfo, type ResourceRequest } from '../parse/index.js';
import { judgeCreated } from './created-object.js';
import { decide } from './enforce.js';
import { readableAccept, shardQuery } from './shard-query.js';
import { statusBody, statusFor, type KubeStatus } from './status.js';

/**
 * The one judgement of a request, whichever way it came in (pure: the route state and the request's head are its
 * arguments). It answers a refusal, a Status sent in place of the API server's answer, or a plan: what to forward and
 * how to answer. The plain handler, the watch fast path and the upgrade path each call it once and carry out what it
 * says; they differ only in how they send (docs/proxy.md, "The request as judged").
 */

/** The ways into the proxy: fastify's route, the watch fast path, an HTTP upgrade (exec, attach, port-forward). */
export type Way = 'plain' | 'watch' | 'upgrade';

/** What the judgement reads of a request besides its method and target. */
export interface RequestHead {
  method: string;
  /** The request target as sent (path and query). */
  url: string;
  contentType?: string | undefined;
  accept?: string | undefined;
  /** The `Upgrade` header, for the upgrade path. */
  upgrade?: string | undefined;
  /** Whether the request carries a body. */
  hasBody: boolean;
}

/** The labels the request is counted under in the request metrics. */
export interface Counted {
  /** The cluster whose metrics count it: the target's, or the home cluster's for what names none it knows. */
  entry: ClusterEntry | undefined;
  verb: string;
  resource: string;
}

export interface Refusal extends Counted {
  kind: 'refuse';
  status: KubeStatus;
  /** Set where the client should retry: sent as `Retry-After`. */
  retryAfterSeconds?: number;
  /** The request refused, once its cluster is known: rules in force may still answer it in place of this refusal. */
  target?: { cluster: string; info: RequestInfo };
}

/**
 * How the API server's answer is sent on: `lock` restores a renamed lock; `object` and `list` are judged from the
 * answer (uid-sharded reads, lists of unlabelled objects); `filtered-watch` relays a sharded watch's events through
 * the shard's filter; `watch` streams its events as they come. Those four read only a 200; any other answer, and
 * every `plain` one, is sent as it came (read whole first when it ends by itself: answer/send-answer.ts).
 */
export type AnswerMode = 'lock' | 'object' | 'list' | 'filtered-watch' | 'watch' | 'plain';

export interface Plan extends Counted {
  kind: 'forward';
  way: Way;
  state: RouteState;
  entry: ClusterEntry;
  cluster: string;
  info: RequestInfo;
  /** The path to send (a lock's name renamed). */
  path: string;
  /** The query to send (the shard's selection put in). */
  query: QueryParams;
  /**
   * The body the proxy must read before it can finish judging: the lock's, a Namespace create's, or the object a
   * create makes where it decides (a Secret's type and name, a cluster-scoped object's labels); none otherwise.
   */
  read?: 'lock' | 'namespace' | 'created';
  /** The body read and judged, forwarded in place of the client's. */
  body?: Buffer | string;
  /** The type of `body` where the proxy changed it (a write given a uid precondition); default: the client's. */
  contentType?: string;
  /** A write to an object sharded by uid: the entry reads the object and forwards the body with its uid precondition. */
  objectWrite?: ResourceRequest & { verb: 'update' | 'patch' | 'delete' };
  /** The shard's selection put into a sharded list, watch or collection delete. */
  selection?: ResourceSelection;
  answer: AnswerMode;
  /** The Accept sent, where the proxy reads the answer. */
  accept?: string;
  /** Whether the answer must come unencoded (the proxy reads it). */
  identity: boolean;
  /** The request is the shard's own leader-election lock: served even by a proxy unsure of what it owns. */
  lock: boolean;
}

export type Judgement = Refusal | Plan;

/** The only requests upgraded: they stream to a container of one pod, judged by the pod's namespace. */
const STREAMING_SUBRESOURCES = new Set(['exec', 'attach', 'portforward']);
/** The protocols kubectl and client-go use for them. */
const STREAMING_PROTOCOL = /^(spdy\/3\.1|websocket)$/iu;

export function isRefused(judgement: Judgement): judgement is Refusal {
  return judgement.kind === 'refuse';
}

/** A refusal of what `from` judged: a plan's (its target known) or a request's whose cluster is not known. */
export function refuse(from: Counted | Plan, status: KubeStatus, retryAfterSeconds?: number): Refusal {
  return {
    kind: 'refuse',
    entry: from.entry,
    verb: from.verb,
    resource: from.resource,
    status,
    ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }),
    ...('kind' in from && from.kind === 'forward' ? { target: { cluster: from.cluster, info: from.info } } : {}),
  };
}

function isNamespaceCreate(info: ResourceRequest): boolean {
  // Sent to the collection: a POST to a named path already has its namespace (the name) from the path.
  return info.verb === 'create' && info.group === '' && info.resource === 'namespaces' && info.name === undefined;
}

function isSecret(info: ResourceRequest): boolean {
  return info.group === '' && info.resource === 'secrets';
}

/**
 * A `continue` the proxy sealed (a list it filtered: continue-tokens.ts), opened in the query for the API server;
 * the Status to answer when it cannot be opened. The API server's own tokens pass as they are: whatever they resume,
 * the answer is judged as any other.
 */
function openContinue(plan: Plan): KubeStatus | undefined {
  const token = plan.query.get('continue');
  const tokens = plan.state.continueTokens;
  if (token === undefined || !tokens.isSealed(token)) return undefined;
  const opened = tokens.open(token, continueBinding(plan));
  if (opened === undefined) {
    return statusBody(410, 'Expired', 'the continue token was not issued by this proxy for this list (another replica, or a restart): list again from the start');
  }
  plan.query.set('continue', opened);
  return undefined;
}

/** What a sealed `continue` is bound to: the cluster and the list's path (its resource and namespace). */
export function continueBinding(plan: Plan): string {
  return `${plan.cluster}\n${plan.path}`;
}

/** Whether a body is sent as JSON (the one encoding the proxy reads of every kind). */
export function isJson(contentType: string | undefined): boolean {
  return contentType !== undefined && /^application\/json\s*(;|$)/iu.test(contentType);
}

/**
 * The namespace a Namespace create makes: `metadata.name` of a JSON body. Undefined (so refused) when the body
 * also carries another `metadata.namespace`, which the API server records as the request's namespace.
 */
function namespaceCreated(body: string): string | undefined {
  try {
    const metadata = (JSON.parse(body) as { metadata?: { name?: unknown; namespace?: unknown } } | null)?.metadata;
    const name = metadata?.name;
    if (typeof name !== 'string' || name === '') return undefined;
    const namespace = metadata?.namespace;
    return namespace === undefined || namespace === '' || namespace === name ? name : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Judges a request from its head. A plan with `read` set needs the request's body: the entry reads it (bounded) and
 * finishes with `judgeBody`. `state` is the route state in force (undefined: no table yet).
 */
export function judgeRequest(state: RouteState | undefined, head: RequestHead, way: Way): Judgement {
  if (state === undefined) {
    return refuse({ entry: undefined, verb: '', resource: '' }, statusBody(503, 'ServiceUnavailable', 'the proxy has no route table yet; retry shortly'), 1);
  }
  const parsed = parseApiRequest(head.method, head.url);
  if (isRefusal(parsed)) return refuse({ entry: state.home, verb: 'invalid', resource: '' }, statusFor(parsed.code, parsed.message));
  const { info } = parsed;
  const counted: Counted = { entry: state.home, verb: info.kind === 'resource' ? info.verb : 'nonresource', resource: info.kind === 'resource' ? info.resource : '' };
  if (way === 'upgrade') {
    // An upgrade carries no body: the API server would wait for one sent only after the switch, and both sides would wait for good.
    if (head.hasBody) return refuse(counted, statusFor(400, 'an upgrade request carries no body (Content-Length or Transfer-Encoding)'));
    const protocol = head.upgrade ?? '';
    const streaming =
      info.kind === 'resource' && info.group === '' && info.resource === 'pods' && STREAMING_SUBRESOURCES.has(info.subresource ?? '') && STREAMING_PROTOCOL.test(protocol);
    if (!streaming) {
      return refuse(
        counted,
        statusFor(400, `only exec, attach and port-forward are upgraded through the proxy (SPDY/3.1 or WebSocket), not "${protocol}" on ${parsed.path}: send the request without Upgrade`),
      );
    }
  }
  const cluster = parsed.cluster ?? state.table.homeCluster;
  const entry = state.clusters.get(cluster);
  if (entry === undefined) {
    return refuse(counted, statusBody(404, 'NotFound', `cluster "${cluster}" is not in the route table of shard "${state.table.shard}"`));
  }
  const plan: Plan = {
    kind: 'forward',
    way,
    ...counted,
    entry,
    state,
    cluster,
    info,
    path: parsed.path,
    query: parsed.query,
    answer: 'plain',
    identity: false,
    lock: false,
  };
  const renamer = state.renamer;
  if (info.kind === 'resource') {
    const concerns = renamer?.concerns(info);
    if (concerns === 'foreign' && renamer) return refuse(plan, statusFor(403, renamer.foreignRefusal(info.resource, info.name ?? '')));
    if (concerns === 'path' && renamer) {
      plan.lock = true;
      plan.path = renamer.renamePath(plan.path);
    }
    // Bodies read to judge the request: the lock's (its name is renamed, in a create's body or an update's) and a
    // Namespace create's (its name is its bucket). Whatever was read is what is forwarded.
    if (isNamespaceCreate(info)) {
      if (!isJson(head.contentType)) return refuse(plan, statusFor(415, 'a Namespace create must be sent as JSON: the proxy reads its name to judge its bucket'));
      if (head.hasBody) return { ...plan, read: 'namespace' };
      return complete({ ...plan, info: { ...info, namespace: undefined } }, head);
    }
    if (concerns !== undefined && head.hasBody) return { ...plan, read: 'lock' };
  }
  return complete(plan, head);
}

/** Finishes the judgement of a plan that needed the request's body, with the body read (at most the bound). */
export function judgeBody(plan: Plan, body: Buffer, head: RequestHead): Judgement {
  const { info } = plan;
  if (plan.read === 'namespace' && info.kind === 'resource') {
    const text = body.toString('utf8');
    return complete({ ...plan, read: undefined, body: text, info: { ...info, namespace: namespaceCreated(text) } }, head);
  }
  const renamer = plan.state.renamer;
  if (plan.read === 'lock' && renamer && info.kind === 'resource') {
    let renamed: ReturnType<typeof renamer.renameBody>;
    try {
      renamed = renamer.renameBody(body, head.contentType);
    } catch (err) {
      if (err instanceof UnreadableBodyError) return refuse(plan, statusFor(err.statusCode, err.message));
      throw err;
    }
    if (renamed.object === 'foreign') return refuse(plan, statusFor(403, renamer.foreignRefusal(info.resource, renamed.name ?? '')));
    return complete({ ...plan, read: undefined, body: renamed.body, lock: plan.lock || renamed.object === 'lock' }, head);
  }
  if (plan.read === 'created') return judgeCreated({ ...plan, read: undefined }, body, head.contentType);
  return complete({ ...plan, read: undefined, body }, head);
}

/** The judgement once the request's target and body are known: the shard's rule, the selection, the answer's mode. */
function complete(plan: Plan, head: RequestHead): Judgement {
  const { state, entry, info } = plan;
  // Only the shard's own lock is served by a proxy that cannot tell what it owns: its leader stays elected (a lost
  // election stops a controller-runtime operator) while nothing else is read or written.
  if (state.unsure !== undefined && !plan.lock) return refuse(plan, statusBody(503, 'ServiceUnavailable', state.unsure), 1);
  if (plan.lock) {
    // A lock is the shard's own: it lives in the operator's namespace, whatever bucket that is.
    return { ...plan, answer: 'lock', identity: true, ...(state.renamer ? { accept: state.renamer.accept(head.accept) } : {}) };
  }
  if (info.kind === 'resource') {
    const mesh = state.mesh.refusal(info);
    if (mesh !== undefined) return refuse(plan, statusBody(403, 'Forbidden', mesh, { ...(info.name === undefined ? {} : { name: info.name }), group: info.group, kind: info.resource }));
  }
  const decision = decide(info, entry.view, state.table.shard);
  if (decision.kind === 'deny') return refuse(plan, decision.body);
  if (info.kind !== 'resource') return plan;
  const watch = info.verb === 'watch';
  if (decision.created === true || (info.verb === 'create' && info.name === undefined && isSecret(info) && plan.body === undefined)) {
    if (!head.hasBody) return refuse(plan, statusFor(400, 'a create carries the object it makes: none was sent'));
    return { ...plan, read: 'created' };
  }
  if (decision.byObject === true) {
    if (info.verb === 'update' || info.verb === 'patch' || info.verb === 'delete') {
      return { ...plan, objectWrite: { ...info, verb: info.verb } };
    }
    // A read of one object judged by its uid or labels is judged from the answer, which the proxy must then be able to
    // read: a HEAD's answer has no object.
    if (info.verb === 'get' && head.method === 'HEAD') return refuse(plan, statusBody(405, 'MethodNotAllowed', 'this object is judged from its answer, which a HEAD has not: send GET'));
    if (info.verb === 'get') return { ...plan, answer: 'object', identity: true, accept: readableAccept(plan.query, head.accept) };
  }
  if (info.verb === 'list' && !watch) {
    const opened = openContinue(plan);
    if (opened !== undefined) return refuse(plan, opened);
  }
  if (decision.sharded === true) {
    const selection = shardQuery(entry, info, plan.query);
    if ('kind' in selection) return refuse(plan, selection);
    if (watch) return { ...plan, selection, answer: 'filtered-watch', identity: true, accept: readableAccept(plan.query, head.accept) };
    // A list from a cluster whose objects carry no labels: the proxy reads its head (the echo) or all of it.
    if (info.verb === 'list' && entry.view.eventJudge(info.group, info.resource).mustJudge) {
      return { ...plan, selection, answer: 'list', identity: true, accept: readableAccept(plan.query, head.accept) };
    }
    return { ...plan, selection };
  }
  return watch ? { ...plan, answer: 'watch' } : plan;
}
