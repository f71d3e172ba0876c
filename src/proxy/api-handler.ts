import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { decide } from './enforce.js';
import { forward, readBody, sendRestored, type UpstreamResponse } from './forward.js';
import { isWrite, parseRequestInfo, type RequestInfo } from './request-info.js';
import type { RouteController } from './route-controller.js';
import type { ClusterEntry } from './route-state.js';
import { withClientSelector } from './shard-view.js';
import { statusBody, type KubeStatus } from './status.js';
import { WatchEventFilter } from './watch-filter.js';

const CLUSTER_PREFIX = '/clusters/';

/** Reads `/clusters/<name>/rest` into the cluster name and the rest; undefined name = the home cluster. */
export function splitClusterPrefix(path: string): { cluster: string | undefined; path: string } {
  if (!path.startsWith(CLUSTER_PREFIX)) return { cluster: undefined, path };
  const end = path.indexOf('/', CLUSTER_PREFIX.length);
  const cluster = decodeURIComponent(path.slice(CLUSTER_PREFIX.length, end < 0 ? undefined : end));
  return { cluster, path: end < 0 ? '/' : path.slice(end) };
}

export function sendStatus(reply: FastifyReply, status: KubeStatus, retryAfterSeconds?: number): FastifyReply {
  if (retryAfterSeconds !== undefined) reply.header('retry-after', String(retryAfterSeconds));
  return reply.code(status.code).type('application/json').send(JSON.stringify(status));
}

/** A check run before enforcement (rate limits, fault injection): it may answer in place of the API server. */
export type RequestGuard = (call: { cluster: string; info: RequestInfo; request: FastifyRequest; reply: FastifyReply }) => Promise<boolean>;

export interface ApiHandlerOptions {
  controller: RouteController;
  logger: Logger;
  /** Seconds a client is told to wait while a cluster's breaker is open. */
  breakerRetryAfterSeconds: number;
  guard?: RequestGuard;
}

/** The proxy's one route: resolve the cluster, enforce the shard, forward through the cluster's breaker. */
export function createApiHandler(options: ApiHandlerOptions): (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply> {
  const { controller, logger, breakerRetryAfterSeconds, guard } = options;

  // Every path returns `reply`: a response sent later from a callback (watch streams, renamed locks) must not be
  // pre-empted by fastify answering an async handler that resolved with nothing.
  return async function handle(request, reply) {
    const started = performance.now();
    const state = controller.current;
    if (state === undefined) {
      return sendStatus(reply, statusBody(503, 'ServiceUnavailable', 'the proxy has no route table yet; retry shortly'), 1);
    }
    const rawUrl = request.raw.url ?? '/';
    const q = rawUrl.indexOf('?');
    const split = splitClusterPrefix(q < 0 ? rawUrl : rawUrl.slice(0, q));
    const clusterName = split.cluster ?? state.table.homeCluster;
    const entry = state.clusters.get(clusterName);
    if (entry === undefined) {
      return sendStatus(reply, statusBody(404, 'NotFound', `cluster "${clusterName}" is not in the route table of shard "${state.table.shard}"`));
    }
    const rawQuery = q < 0 ? '' : rawUrl.slice(q + 1);
    const query = new URLSearchParams(rawQuery);
    const info = parseRequestInfo(request.method, split.path, query);
    const verb = info.kind === 'resource' ? info.verb : 'nonresource';
    const resource = info.kind === 'resource' ? info.resource : '';
    const observe = (code: number): void => entry.metrics.observe(verb, resource, code, (performance.now() - started) / 1000);

    if (guard && (await guard({ cluster: clusterName, info, request, reply }))) {
      observe(reply.statusCode);
      return reply;
    }
    const renamer = state.renamer;
    let path = split.path;
    let body: string | undefined;
    let lock = false;
    if (renamer && info.kind === 'resource') {
      const concerns = renamer.concerns(info);
      if (concerns !== undefined && request.body !== undefined && request.body !== null) {
        const original = await readBody(request.body as Readable);
        body = renamer.renameBody(original);
        lock = concerns === 'path' || body !== original;
      } else {
        lock = concerns === 'path';
      }
      if (concerns === 'path') path = renamer.renamePath(path);
    }
    // A lock is the shard's own: it lives in the operator's namespace, whatever bucket that is.
    const decision = lock ? { kind: 'forward' as const } : decide(info, entry.view, state.table.shard);
    if (decision.kind === 'deny') {
      observe(decision.body.code);
      return sendStatus(reply, decision.body);
    }
    // The query is rebuilt only when a selector is injected; otherwise it goes on exactly as the client wrote it.
    let upstreamQuery = rawQuery;
    if (decision.labelSelector !== undefined) {
      query.set('labelSelector', withClientSelector(query.get('labelSelector'), decision.labelSelector));
      upstreamQuery = query.toString();
    }
    const filterWatch = decision.filterWatch === true && info.kind === 'resource';

    const onResponse = (out: FastifyReply, res: UpstreamResponse): void => {
      observe(res.statusCode);
      if (lock && renamer) {
        sendRestored(out, res, renamer).catch((err: unknown) => out.send(err));
      } else if (filterWatch && res.statusCode === 200) {
        out.send(openFilteredWatch({ entry, info, selector: decision.labelSelector ?? '', res, controller, bookmarks: query.get('allowWatchBookmarks') === 'true' }));
        // Node holds response headers until the first body byte; a quiet watch must still start at once.
        out.raw.flushHeaders();
      } else {
        out.send(res.stream);
      }
    };
    try {
      const sent = entry.breaker.fire(() => forward(request, reply, { entry, path, query: upstreamQuery, body, json: filterWatch, onResponse }));
      await (info.kind === 'resource' && isWrite(info.verb) ? controller.writes.track(sent) : sent);
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
  info: RequestInfo & { kind: 'resource' };
  selector: string;
  res: UpstreamResponse;
  controller: RouteController;
  bookmarks: boolean;
}): Readable {
  const { entry, info, selector, res, controller, bookmarks } = options;
  const cluster = entry.view.name;
  const { group, resource } = info;
  const filter = new WatchEventFilter({
    // The current table's view, so events are judged by the newest assignment even before the watch ends.
    admit: (labels) => controller.current?.clusters.get(cluster)?.view.admits(group, resource, labels) === true,
    bookmarks,
    onFiltered: () => entry.metrics.watchEventsFiltered.inc(),
  });
  const unregister = controller.watches.add({
    cluster,
    group,
    resource,
    selector,
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
