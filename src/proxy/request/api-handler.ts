import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { BodyTooLargeError, UnjudgedListError, UnreadableBodyError } from '../../errors.js';
import type { RouteController } from '../routes/route-controller.js';
import type { ClusterEntry } from '../routes/route-state.js';
import type { ResourceSelection } from '../routes/shard-view.js';
import { decide } from './enforce.js';
import { judgeObjectWrite, sendJudgedObject } from './by-object.js';
import { failureAnswer, forward, sendRestored, type UpstreamResponse } from './forward.js';
import { judgeList } from './list-filter.js';
import { isPipelined, untilTurn } from './pipelined.js';
import { isRefusal, isWrite, parseApiRequest, readBoundedBytes, type HeaderPolicy, type RequestInfo, type ResourceRequest } from './parse/index.js';
import { sendStatus, statusBody, statusFor, tableChanged, type KubeStatus } from './status.js';
import { readableAccept, shardQuery } from './shard-query.js';
import { relayWatch } from './watch-relay.js';
import { acceptsGzip, sendGunzipped } from './gzip-answer.js';
import { sendWhole } from './whole-body.js';

/**
 * The answer to an error no other code answered (a client's body cut while the proxy read it, a list cut while it
 * judged it): a Kubernetes Status with the error's own code, else 500 InternalError, as the proxy's every answer
 * of its own is, so clients read it as they read the API server's; never fastify's own error JSON. Server errors are
 * logged. (After the head went out fastify ends the connection instead: nothing can be answered then.)
 */
export function apiErrorHandler(logger: Logger): (err: FastifyError, request: FastifyRequest, reply: FastifyReply) => void {
  return (err, request, reply) => {
    const code = err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
    if (code >= 500) logger.error({ err, method: request.method }, 'a request failed in the proxy');
    sendStatus(reply, statusFor(code, code >= 500 ? `the proxy could not complete the request: ${err.message}` : err.message));
  };
}

/** A check run before enforcement (rate limits, fault injection), which may answer in place of the API server. */
export interface RequestGuard {
  /** Whether a rule in force may judge this request; asked first, it changes nothing (a request it does not apply to goes on at once). */
  applies(info: RequestInfo): boolean;
  /** Judges a request it applies to: answers it (true) or lets it pass (false). */
  judge(call: { cluster: string; info: RequestInfo; reply: FastifyReply }): Promise<boolean>;
}

/** What the proxy reads of a request beyond its target, and which headers it lets through. */
export interface RequestPolicy extends HeaderPolicy {
  /** The most the proxy buffers of a body it must read to judge (a lock, a Namespace create); larger gets 413. */
  maxBodyBytes: number;
}

export interface ApiHandlerOptions {
  controller: RouteController;
  logger: Logger;
  /** Seconds a client is told to wait while a cluster's breaker is open. */
  breakerRetryAfterSeconds: number;
  requests: RequestPolicy;
  guard?: RequestGuard;
}

function isNamespaceCreate(info: ResourceRequest): boolean {
  // Sent to the collection: a POST to a named path already has its namespace (the name) from the path.
  return info.verb === 'create' && info.group === '' && info.resource === 'namespaces' && info.name === undefined;
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

function isJson(contentType: string | undefined): boolean {
  return contentType !== undefined && /^application\/json\s*(;|$)/iu.test(contentType);
}

/**
 * The proxy's one route: judge the request as the API server will read it, enforce the shard, forward what was judged.
 * The route itself is synchronous and every answer goes by `reply` alone: an async route would have fastify wait on
 * the reply as a promise, which holds listeners on each response until it ends (a watch's, for as long as it lasts).
 */
export function createApiHandler(options: ApiHandlerOptions): (request: FastifyRequest, reply: FastifyReply) => void {
  const { controller, logger, breakerRetryAfterSeconds, guard, requests } = options;

  const handle = async (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> => {
    // Judged and forwarded at its turn, under the table then in force; never when its client left before.
    if (isPipelined(reply.raw) && !(await untilTurn(request.raw, reply.raw))) return reply;
    const started = performance.now();
    const state = controller.current;
    if (state === undefined) {
      return sendStatus(reply, statusBody(503, 'ServiceUnavailable', 'the proxy has no route table yet; retry shortly'), 1);
    }
    const parsed = parseApiRequest(request.method, request.raw.url ?? '/');
    if (isRefusal(parsed)) {
      state.home?.metrics.observe('invalid', '', parsed.code, (performance.now() - started) / 1000);
      return sendStatus(reply, statusFor(parsed.code, parsed.message));
    }
    const clusterName = parsed.cluster ?? state.table.homeCluster;
    const entry = state.clusters.get(clusterName);
    if (entry === undefined) {
      return sendStatus(reply, statusBody(404, 'NotFound', `cluster "${clusterName}" is not in the route table of shard "${state.table.shard}"`));
    }
    let info = parsed.info;
    const { query } = parsed;
    const verb = info.kind === 'resource' ? info.verb : 'nonresource';
    const resource = info.kind === 'resource' ? info.resource : '';
    const observe = (code: number): void => entry.metrics.observe(verb, resource, code, (performance.now() - started) / 1000);
    const refuse = (status: KubeStatus, retryAfterSeconds?: number): FastifyReply => {
      observe(status.code);
      return sendStatus(reply, status, retryAfterSeconds);
    };

    if (guard?.applies(info) && (await guard.judge({ cluster: clusterName, info, reply }))) {
      observe(reply.statusCode);
      return reply;
    }
    const renamer = state.renamer;
    let path = parsed.path;
    let body: string | Buffer | undefined;
    let contentType: string | undefined;
    let lock = false;
    /** The client's body, at most maxBodyBytes; a larger one is answered 413 (the returned reply). */
    const readBody = async (): Promise<Buffer | FastifyReply> => {
      if (request.body === undefined || request.body === null) return Buffer.alloc(0);
      try {
        return await readBoundedBytes(request.body as Readable, requests.maxBodyBytes, request.headers['content-length']);
      } catch (err) {
        if (err instanceof BodyTooLargeError) {
          // The rest of the body stays unread: the connection cannot carry another request.
          reply.header('connection', 'close');
          return refuse(statusFor(413, err.message));
        }
        throw err;
      }
    };
    if (info.kind === 'resource') {
      const concerns = renamer?.concerns(info);
      if (concerns === 'foreign' && renamer) return refuse(statusFor(403, renamer.foreignRefusal(info.resource, info.name ?? '')));
      const namespaceCreate = isNamespaceCreate(info);
      // Bodies read to judge the request: the lock's (its name is renamed, in a create's body or an update's) and a
      // Namespace create's (its name is its bucket). Whatever was read is what is forwarded.
      if (concerns !== undefined || namespaceCreate) {
        if (namespaceCreate && !isJson(request.headers['content-type'])) {
          return refuse(statusFor(415, 'a Namespace create must be sent as JSON: the proxy reads its name to judge its bucket'));
        }
        let read: Buffer | undefined;
        if (request.body !== undefined && request.body !== null) {
          const bytes = await readBody();
          if (!Buffer.isBuffer(bytes)) return bytes;
          read = bytes;
        }
        if (concerns !== undefined && renamer) {
          try {
            const renamed = read === undefined ? undefined : renamer.renameBody(read, request.headers['content-type']);
            if (renamed?.object === 'foreign') return refuse(statusFor(403, renamer.foreignRefusal(info.resource, renamed.name ?? '')));
            lock = concerns === 'path' || renamed?.object === 'lock';
            body = renamed?.body;
          } catch (err) {
            if (err instanceof UnreadableBodyError) return refuse(statusFor(err.statusCode, err.message));
            throw err;
          }
          if (concerns === 'path') path = renamer.renamePath(path);
        }
        if (namespaceCreate) {
          body = read?.toString('utf8');
          info = { ...info, namespace: namespaceCreated(body ?? '') };
        }
      }
    }
    // Only the shard's own lock is served by a proxy that cannot tell what it owns: its leader stays elected (a lost
    // election stops a controller-runtime operator) while nothing else is read or written.
    if (state.unsure !== undefined && !lock) return refuse(statusBody(503, 'ServiceUnavailable', state.unsure), 1);
    // A lock is the shard's own: it lives in the operator's namespace, whatever bucket that is.
    const decision = lock ? { kind: 'forward' as const } : decide(info, entry.view, state.table.shard);
    if (decision.kind === 'deny') return refuse(decision.body);
    const byObject = decision.byObject === true && info.kind === 'resource' ? info : undefined;
    if (byObject && (byObject.verb === 'update' || byObject.verb === 'patch' || byObject.verb === 'delete')) {
      const read = body ?? (await readBody());
      if (typeof read !== 'string' && !Buffer.isBuffer(read)) return read;
      let judged: Awaited<ReturnType<typeof judgeObjectWrite>>;
      try {
        judged = await judgeObjectWrite({ entry, info: { ...byObject, verb: byObject.verb }, shard: state.table.shard, contentType: request.headers['content-type'], body: read.toString('utf8') });
      } catch (err) {
        logger.warn({ err, cluster: clusterName }, 'could not read an object sharded by uid before writing it');
        return refuse(statusFor(503, `cluster "${clusterName}": the proxy could not read the object to judge this write: ${(err as Error).message}`));
      }
      if ('kind' in judged) return refuse(judged);
      ({ body, contentType } = judged);
    }
    // A read of one object sharded by uid is judged from the answer, which the proxy must then be able to read.
    const judgedObject = byObject?.verb === 'get' ? byObject : undefined;
    const sharded = decision.sharded === true && info.kind === 'resource' ? info : undefined;
    const shardedWatch = sharded?.verb === 'watch';
    let selection: ResourceSelection | undefined;
    if (sharded) {
      const shardedQuery = shardQuery(entry, sharded, query);
      if ('kind' in shardedQuery) return refuse(shardedQuery);
      selection = shardedQuery;
    }
    // A list from a cluster whose objects carry no labels: the proxy reads its head (the echo) or all of it.
    const judged = sharded?.verb === 'list' && selection !== undefined && entry.view.eventJudge(sharded.group, sharded.resource).mustJudge ? selection : undefined;
    const accept = lock && renamer ? renamer.accept(request.headers.accept) : shardedWatch || judged || judgedObject ? readableAccept(query, request.headers.accept) : undefined;
    // Every answer the proxy reads must come unencoded, a sharded watch's events included. An answer it passes on to a
    // client that takes no encoding is asked for as gzip and decoded: cheaper for a long list (gzip-answer.ts).
    const encoding =
      judged !== undefined || judgedObject !== undefined || shardedWatch || lock
        ? 'identity'
        : request.method === 'GET' && endsByItself(info) && !acceptsGzip(request.headers['accept-encoding'])
          ? 'gzip'
          : undefined;

    const onResponse = (out: FastifyReply, res: UpstreamResponse): void => {
      observe(res.statusCode);
      if (lock && renamer) {
        sendRestored(out, res, renamer, requests.maxBodyBytes).catch((err: unknown) => out.send(err));
      } else if (judgedObject && res.statusCode === 200) {
        sendJudgedObject({ reply: out, res, entry, info: judgedObject, shard: state.table.shard });
      } else if (judged && info.kind === 'resource' && res.statusCode === 200) {
        sendJudgedList({ reply: out, res, entry, info, selection: judged });
      } else if (shardedWatch && info.kind === 'resource' && res.statusCode === 200) {
        relayFilteredWatch({ reply: out, entry, info, res, controller, bookmarks: query.get('allowWatchBookmarks') === 'true' });
      } else if (info.kind === 'resource' && info.verb === 'watch' && res.statusCode === 200) {
        sendWatch(out, res.stream);
      } else if (encoding === 'gzip' && out.getHeader('content-encoding') === 'gzip') {
        sendGunzipped(out, res);
      } else if (endsByItself(info) && request.method !== 'HEAD') {
        sendWhole(out, res);
      } else {
        out.send(res.stream);
      }
    };
    if (!controller.stillServes(state)) {
      return refuse(tableChanged());
    }
    try {
      const sent = entry.breaker.fire(() =>
        forward(request, reply, {
          entry,
          path,
          query: query.toString(),
          body,
          contentType,
          accept,
          encoding,
          watch: info.kind === 'resource' && info.verb === 'watch',
          headers: requests,
          onResponse,
        }),
      );
      await (info.kind === 'resource' && isWrite(info.verb) ? controller.trackWrite(sent) : sent);
    } catch (err) {
      if (reply.sent) return reply;
      const failed = failureAnswer(err, clusterName, breakerRetryAfterSeconds, logger);
      sendStatus(reply, failed.status, failed.retryAfterSeconds);
      observe(reply.statusCode);
    }
    return reply;
  };
  return (request, reply) => {
    handle(request, reply).catch((err: unknown) => reply.send(err));
  };
}

/**
 * Sends a list judged by the view it was sent under: untouched when the API server echoed the shard selector,
 * otherwise filtered by the proxy; an answer it cannot read is refused (502), never passed on.
 */
function sendJudgedList(options: { reply: FastifyReply; res: UpstreamResponse; entry: ClusterEntry; info: ResourceRequest; selection: ResourceSelection }): void {
  const { reply, res, entry, info, selection } = options;
  const fail = (reason: string): void => {
    res.stream.destroy();
    reply.removeHeader('content-length').removeHeader('content-encoding');
    sendStatus(reply, statusFor(502, reason));
  };
  if (reply.getHeader('content-encoding') !== undefined) return fail('the proxy must read this list and the API server sent it encoded');
  const judge = entry.view.eventJudge(info.group, info.resource);
  judgeList(res.stream, {
    expected: judge.echoSuffices ? selection.shardSelector : undefined,
    admit: judge.admits,
    labelKeys: judge.labelKeys,
    onFiltered: (unconfirmed) => (unconfirmed ? entry.metrics.listsFiltered.noEcho : entry.metrics.listsFiltered.unlabelled).inc(),
  }).then(
    (body) => {
      if (typeof body === 'string' || Buffer.isBuffer(body)) reply.removeHeader('content-length');
      void reply.send(body);
    },
    (err: unknown) => (err instanceof UnjudgedListError ? fail(err.message) : void reply.send(err)),
  );
}

/** Sends a watch's events as they come, its head at once: Node would hold it until the first event. */
function sendWatch(reply: FastifyReply, events: Readable): void {
  reply.send(events);
  // A quiet watch must still start, as the API server starts it.
  reply.raw.flushHeaders();
}

/**
 * Sends a sharded watch's head at once and relays its events through the shard's event filter (relayWatch). The
 * response is written directly: fastify's sending of a stream would add a pipe and its end-of-stream watchers to every
 * watch.
 */
function relayFilteredWatch(options: { reply: FastifyReply; entry: ClusterEntry; info: ResourceRequest; res: UpstreamResponse; controller: RouteController; bookmarks: boolean }): void {
  const { reply, res, ...watch } = options;
  reply.hijack();
  // The headers fastify holds for the reply, as its own sending writes them.
  relayWatch({ ...watch, res: reply.raw, answer: { statusCode: res.statusCode, headers: reply.getHeaders() as OutgoingHttpHeaders, stream: res.stream } });
}

/**
 * Whether the API server's answer to a request ends by itself, soon: an object or a list, whatever the verb, but not
 * a watch, nor a subresource other than status (a followed log, a proxied connection stream for as long as they last).
 * (A HEAD's answer has no body but keeps the length of the one it stands for: it passes as it is.)
 */
function endsByItself(info: RequestInfo): boolean {
  return info.kind === 'resource' && info.verb !== 'watch' && (info.subresource === undefined || info.subresource === 'status');
}
