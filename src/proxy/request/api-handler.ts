import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { BodyTooLargeError, SelectorSyntaxError } from '../../errors.js';
import type { RouteController } from '../routes/route-controller.js';
import type { ClusterEntry } from '../routes/route-state.js';
import { decide } from './enforce.js';
import { forward, sendRestored, type UpstreamResponse } from './forward.js';
import { isRefusal, isWrite, parseApiRequest, readBoundedBody, type HeaderPolicy, type RequestInfo, type ResourceRequest } from './parse/index.js';
import { statusBody, statusFor, type KubeStatus } from './status.js';
import { WatchEventFilter } from './watch-filter.js';

export function sendStatus(reply: FastifyReply, status: KubeStatus, retryAfterSeconds?: number): FastifyReply {
  if (retryAfterSeconds !== undefined) reply.header('retry-after', String(retryAfterSeconds));
  return reply.code(status.code).type('application/json').send(JSON.stringify(status));
}

/** A check run before enforcement (rate limits, fault injection): it may answer in place of the API server. */
export type RequestGuard = (call: { cluster: string; info: RequestInfo; request: FastifyRequest; reply: FastifyReply }) => Promise<boolean>;

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
 * The Accept sent for a watch the proxy filters: only the client's JSON media types (Tables and metadata-only
 * objects included, so kubectl keeps its columns), or plain JSON when it asked for none (protobuf clients read JSON).
 */
function watchAccept(accept: string | undefined): { accept: string; table: boolean } {
  const json = (accept ?? '').split(',').map((m) => m.trim()).filter((m) => isJson(m));
  if (json.length === 0) return { accept: 'application/json', table: false };
  return { accept: json.join(','), table: json.some((m) => /;\s*as=Table\b/iu.test(m)) };
}

/** The proxy's one route: judge the request as the API server will read it, enforce the shard, forward what was judged. */
export function createApiHandler(options: ApiHandlerOptions): (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply> {
  const { controller, logger, breakerRetryAfterSeconds, guard, requests } = options;

  // Every path returns `reply`: a response sent later from a callback (watch streams, renamed locks) must not be
  // pre-empted by fastify answering an async handler that resolved with nothing.
  return async function handle(request, reply) {
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
    const refuse = (status: KubeStatus): FastifyReply => {
      observe(status.code);
      return sendStatus(reply, status);
    };

    if (guard && (await guard({ cluster: clusterName, info, request, reply }))) {
      observe(reply.statusCode);
      return reply;
    }
    const renamer = state.renamer;
    let path = parsed.path;
    let body: string | undefined;
    let lock = false;
    if (info.kind === 'resource') {
      const concerns = renamer?.concerns(info);
      const namespaceCreate = isNamespaceCreate(info);
      // Bodies read to judge the request: the lock's (its name is renamed, in a create's body or an update's) and a
      // Namespace create's (its name is its bucket). Whatever was read is what is forwarded.
      if (concerns !== undefined || namespaceCreate) {
        if (namespaceCreate && !isJson(request.headers['content-type'])) {
          return refuse(statusFor(415, 'a Namespace create must be sent as JSON: the proxy reads its name to judge its bucket'));
        }
        if (request.body !== undefined && request.body !== null) {
          try {
            body = await readBoundedBody(request.body as Readable, requests.maxBodyBytes, request.headers['content-length']);
          } catch (err) {
            if (err instanceof BodyTooLargeError) {
              // The rest of the body stays unread: the connection cannot carry another request.
              reply.header('connection', 'close');
              return refuse(statusFor(413, err.message));
            }
            throw err;
          }
        }
        if (concerns !== undefined && renamer) {
          const renamed = body === undefined ? undefined : renamer.renameBody(body);
          lock = concerns === 'path' || renamed !== body;
          body = renamed;
          if (concerns === 'path') path = renamer.renamePath(path);
        }
        if (namespaceCreate) info = { ...info, namespace: namespaceCreated(body ?? '') };
      }
    }
    // A lock is the shard's own: it lives in the operator's namespace, whatever bucket that is.
    const decision = lock ? { kind: 'forward' as const } : decide(info, entry.view, state.table.shard);
    if (decision.kind === 'deny') return refuse(decision.body);
    const watch = decision.sharded === true && info.kind === 'resource' && info.verb === 'watch';
    if (decision.sharded === true && info.kind === 'resource') {
      try {
        query.set('labelSelector', entry.view.selectorWith(info.group, info.resource, query.get('labelSelector')));
      } catch (err) {
        if (err instanceof SelectorSyntaxError) return refuse(statusFor(400, `labelSelector: ${err.message}`));
        throw err;
      }
    }
    let accept: string | undefined;
    if (watch) {
      const wanted = watchAccept(request.headers.accept);
      accept = wanted.accept;
      // Table rows must carry each object's labels for the event filter to judge them.
      if (wanted.table && query.get('includeObject') === 'None') query.set('includeObject', 'Metadata');
    }

    const onResponse = (out: FastifyReply, res: UpstreamResponse): void => {
      observe(res.statusCode);
      if (lock && renamer) {
        sendRestored(out, res, renamer, requests.maxBodyBytes).catch((err: unknown) => out.send(err));
      } else if (watch && info.kind === 'resource' && res.statusCode === 200) {
        out.send(openFilteredWatch({ entry, info, res, controller, bookmarks: query.get('allowWatchBookmarks') === 'true' }));
        // Node holds response headers until the first body byte; a quiet watch must still start at once.
        out.raw.flushHeaders();
      } else {
        out.send(res.stream);
      }
    };
    if (!controller.stillServes(state)) {
      return refuse(statusFor(503, 'the route table this request was judged by changed or its lease ended meanwhile; retry'));
    }
    try {
      const sent = entry.breaker.fire(() =>
        forward(request, reply, { entry, path, query: query.toString(), body, accept, headers: requests, onResponse }),
      );
      await (info.kind === 'resource' && isWrite(info.verb) ? controller.trackWrite(sent) : sent);
    } catch (err) {
      if (reply.sent) return reply;
      const code = (err as { code?: string }).code;
      if (code === 'EOPENBREAKER') {
        sendStatus(reply, statusBody(503, 'ServiceUnavailable', `cluster "${clusterName}" is failing: its circuit breaker is open`), breakerRetryAfterSeconds);
      } else {
        logger.warn({ err, cluster: clusterName }, 'API server unreachable');
        const timeout = code === 'UND_ERR_HEADERS_TIMEOUT' || (err as Error).name === 'GatewayTimeoutError';
        sendStatus(
          reply,
          statusBody(timeout ? 504 : 503, timeout ? 'InternalError' : 'ServiceUnavailable', `cluster "${clusterName}" API server unreachable: ${(err as Error).message}`),
          timeout ? undefined : 1,
        );
      }
      observe(reply.statusCode);
    }
    return reply;
  };
}

/** Pipes a watch through the shard's event filter and registers it, so a table change can end it. */
function openFilteredWatch(options: {
  entry: ClusterEntry;
  info: ResourceRequest;
  res: UpstreamResponse;
  controller: RouteController;
  bookmarks: boolean;
}): Readable {
  const { entry, info, res, controller, bookmarks } = options;
  const cluster = entry.view.name;
  const { group, resource } = info;
  const filter = new WatchEventFilter({
    // The current table's view, so events are judged by the newest assignment even before the watch ends.
    admit: (labels) => controller.current?.clusters.get(cluster)?.view.admits(group, resource, labels) === true,
    bookmarks,
    onFiltered: () => entry.metrics.watchEventsFiltered.inc(),
  });
  const unregister = controller.registerWatch({
    cluster,
    group,
    resource,
    // The shard's part of the selector: a table that changes it ends this watch.
    selector: entry.view.selectorFor(group, resource),
    expire: () => {
      res.stream.unpipe(filter);
      res.stream.destroy();
      filter.expire();
    },
  });
  entry.metrics.openWatches.inc();
  // Destroying the upstream body (an ended watch) makes undici report an abort: only a live watch fails with it.
  res.stream.on('error', (err) => {
    if (!filter.writableEnded) filter.destroy(err);
  });
  filter.once('close', () => {
    unregister();
    entry.metrics.openWatches.dec();
    res.stream.destroy();
  });
  res.stream.pipe(filter);
  return filter;
}
