import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream';
import type { Logger } from 'pino';
import type { RouteController } from '../routes/route-controller.js';
import type { ClusterEntry, RouteState } from '../routes/route-state.js';
import type { Http2WatchPool } from '../upstream/http2-watches.js';
import type { RequestGuard } from './api-handler.js';
import { decide } from './enforce.js';
import { failureAnswer, openWatchStream } from './forward.js';
import { isRefusal, parseApiRequest, type ApiRequest, type HeaderPolicy, type ResourceRequest } from './parse/index.js';
import { readableAccept, shardQuery } from './shard-query.js';
import { statusFor, tableChanged, writeStatus } from './status.js';
import { relayWatch } from './watch-relay.js';

export interface WatchPathOptions {
  controller: RouteController;
  logger: Logger;
  headers: HeaderPolicy;
  breakerRetryAfterSeconds: number;
  guard?: RequestGuard | undefined;
}

/** Serves a request the way fastify's route does: the watch path's fallback. */
export type NextHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** A sharded watch judged to the end, ready to be sent. */
interface WatchPlan {
  state: RouteState;
  entry: ClusterEntry;
  info: ResourceRequest;
  parsed: ApiRequest;
  watches: Http2WatchPool;
  accept: string;
  started: number;
}

/** Whether a request carries a body, by HTTP/1.1's framing (Node's server has read none of it yet). */
function hasBody(req: IncomingMessage): boolean {
  const length = req.headers['content-length'];
  return (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
}

/**
 * The proxy's hot path: a sharded watch that goes as a stream of the cluster's HTTP/2 connections, judged and relayed
 * on Node's own request and response. A route change makes the operator open its watches again all at once; without
 * fastify's request, reply and routing, and the handler's promises, a watch's opening costs a fifth less CPU
 * (docs/proxy.md, session 24).
 *
 * It takes only a request it judges to the end with the API handler's own functions (parse, decide, shardQuery,
 * readableAccept), and nothing it would refuse: every other request, the refused ones included, goes to `next`
 * (fastify and the API handler), which judges it whole again. Nothing is answered, counted or sent before that choice.
 */
export function createWatchPath(options: WatchPathOptions): (req: IncomingMessage, res: ServerResponse, next: NextHandler) => void {
  const { controller, logger, headers, breakerRetryAfterSeconds, guard } = options;

  const planOf = (req: IncomingMessage, res: ServerResponse): WatchPlan | undefined => {
    // Pipelined (its turn not come: the handler waits for it), or with a body (the handler judges what fastify makes of it).
    if (res.socket === null || hasBody(req)) return undefined;
    const started = performance.now();
    const state = controller.current;
    if (state === undefined || state.unsure !== undefined) return undefined;
    const parsed = parseApiRequest('GET', req.url ?? '/');
    if (isRefusal(parsed) || parsed.info.kind !== 'resource' || parsed.info.verb !== 'watch') return undefined;
    const info = parsed.info;
    const entry = state.clusters.get(parsed.cluster ?? state.table.homeCluster);
    if (entry === undefined || guard?.applies(info) === true || state.renamer?.concerns(info) !== undefined) return undefined;
    const decision = decide(info, entry.view, state.table.shard);
    if (decision.kind !== 'forward' || decision.sharded !== true) return undefined;
    const watches = entry.upstream.http2Watches();
    if (watches === undefined || 'kind' in shardQuery(entry, info, parsed.query)) return undefined;
    return { state, entry, info, parsed, watches, accept: readableAccept(parsed.query, req.headers.accept), started };
  };

  const send = (plan: WatchPlan, req: IncomingMessage, res: ServerResponse): void => {
    const { entry, info, parsed } = plan;
    const observe = (code: number): void => entry.metrics.observe('watch', info.resource, code, (performance.now() - plan.started) / 1000);
    if (!controller.stillServes(plan.state)) {
      observe(503);
      writeStatus(res, tableChanged());
      return;
    }
    const forward = { entry, path: parsed.path, query: parsed.query.toString(), accept: plan.accept, encoding: 'identity' as const, headers };
    entry.breaker
      .fire(async () => {
        const answer = await openWatchStream(plan.watches, req, forward, () => res.destroyed);
        if (answer === undefined) return;
        observe(answer.statusCode);
        if (answer.statusCode === 200) {
          relayWatch({ res, answer, entry, info, controller, bookmarks: parsed.query.get('allowWatchBookmarks') === 'true' });
        } else {
          res.writeHead(answer.statusCode, answer.headers);
          pipeline(answer.stream, res, () => undefined);
        }
      })
      .catch((err: unknown) => {
        try {
          if (res.headersSent) {
            res.destroy();
            return;
          }
          const failed = failureAnswer(err, entry.view.name, breakerRetryAfterSeconds, logger);
          observe(failed.status.code);
          writeStatus(res, failed.status, failed.retryAfterSeconds);
        } catch (unanswered) {
          // Nothing may escape as an unhandled rejection, which ends the process: the client's connection goes instead.
          logger.error({ err: unanswered, cluster: entry.view.name }, 'a watch failed in the proxy');
          res.destroy();
        }
      });
  };

  return (req, res, next) => {
    let plan: WatchPlan | undefined;
    try {
      // A watch names itself in its query (`watch=`) or its path (`/watch/`): a cheap test, which the parse confirms.
      if (req.method === 'GET' && req.url?.includes('watch') === true) plan = planOf(req, res);
    } catch {
      // Judged again by the handler, which answers what failed here as any request's failure.
      plan = undefined;
    }
    if (plan === undefined) {
      next(req, res);
      return;
    }
    try {
      send(plan, req, res);
    } catch (err) {
      logger.error({ err, cluster: plan.entry.view.name }, 'a watch failed in the proxy');
      if (res.headersSent) res.destroy();
      else writeStatus(res, statusFor(500, `the proxy could not complete the request: ${(err as Error).message}`));
    }
  };
}
