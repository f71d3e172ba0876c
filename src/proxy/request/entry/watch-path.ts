import type { IncomingMessage, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream';
import type { Logger } from 'pino';
import type { RouteController } from '../../routes/route-controller.js';
import type { Http2WatchPool } from '../../upstream/index.js';
import { failureAnswer, openWatchStream } from '../answer/forward.js';
import { writeStatus } from '../answer/send-status.js';
import { relayWatch } from '../answer/watch-relay.js';
import { isRefused, judgeRequest, refuse, type Judgement } from '../judgement/judge.js';
import { ruled, type RequestGuard } from '../judgement/rules-guard.js';
import { statusFor, tableChanged } from '../judgement/status.js';
import type { HeaderPolicy } from '../parse/index.js';
import { observe } from './observe.js';

export interface WatchPathOptions {
  controller: RouteController;
  logger: Logger;
  headers: HeaderPolicy;
  breakerRetryAfterSeconds: number;
  guard?: RequestGuard | undefined;
}

/** Serves a request the way fastify's route does: the watch path's fallback. */
export type NextHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** What the watch path judged of a request it passed on to fastify's route: the route then does not judge it again. */
const judgements = new WeakMap<IncomingMessage, Judgement>();

/** The watch path's judgement of a request it passed on, taken once. */
export function takeJudgement(req: IncomingMessage): Judgement | undefined {
  const judged = judgements.get(req);
  judgements.delete(req);
  return judged;
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
 * (bench/results/history.md).
 *
 * A GET that names a watch is judged here, once, as on every way in (judge.ts): a refusal is answered here, a sharded
 * watch is sent here, and any other plan goes to `next` (fastify and the API handler) with its judgement.
 */
export function createWatchPath(options: WatchPathOptions): (req: IncomingMessage, res: ServerResponse, next: NextHandler) => void {
  return (req, res, next) => serveWatch(options, req, res, next);
}

function serveWatch(options: WatchPathOptions, req: IncomingMessage, res: ServerResponse, next: NextHandler): void {
  // A watch names itself in its query (`watch=`) or its path (`/watch/`): a cheap test, which the parse confirms.
  // Pipelined (its turn not come: the handler waits for it), or with a body (the handler judges what fastify makes of it).
  if (req.method !== 'GET' || req.url?.includes('watch') !== true || res.socket === null || hasBody(req)) {
    next(req, res);
    return;
  }
  const started = performance.now();
  let judged: Judgement;
  try {
    judged = judgeRequest(options.controller.current, { method: 'GET', url: req.url, accept: req.headers.accept, hasBody: false }, 'watch');
  } catch {
    // Judged again by the handler, which answers what failed here as any request's failure.
    next(req, res);
    return;
  }
  const watches = !isRefused(judged) && judged.answer === 'filtered-watch' ? judged.entry.upstream.http2Watches() : undefined;
  if (!isRefused(judged) && watches === undefined) {
    judgements.set(req, judged);
    next(req, res);
    return;
  }
  carryOut(options, judged, watches, req, res, started).catch((err: unknown) => {
    options.logger.error({ err }, 'a watch failed in the proxy');
    if (res.headersSent) res.destroy();
    else writeStatus(res, statusFor(500, `the proxy could not complete the request: ${(err as Error).message}`));
  });
}

/** Answers a refusal, or sends a sharded watch through its cluster's breaker and relays its events. */
async function carryOut(options: WatchPathOptions, judged: Judgement, watches: Http2WatchPool | undefined, req: IncomingMessage, res: ServerResponse, started: number): Promise<void> {
  const { controller, logger } = options;
  let verdict = await ruled(options.guard, judged);
  if (!isRefused(verdict) && !controller.stillServes(verdict.state)) verdict = refuse(verdict, tableChanged());
  if (isRefused(verdict) || watches === undefined) {
    if (isRefused(verdict)) {
      observe(verdict, verdict.status.code, started);
      writeStatus(res, verdict.status, verdict.retryAfterSeconds);
    }
    return;
  }
  const plan = verdict;
  const { entry } = plan;
  const forward = { entry, path: plan.path, query: plan.query.toString(), accept: plan.accept, encoding: 'identity' as const, headers: options.headers };
  try {
    await entry.breaker.fire(async () => {
      const answer = await openWatchStream(watches, req, forward, () => res.destroyed);
      if (answer === undefined) return;
      observe(plan, answer.statusCode, started);
      if (answer.statusCode === 200 && plan.info.kind === 'resource') {
        relayWatch({ res, answer, entry, info: plan.info, controller, bookmarks: plan.query.get('allowWatchBookmarks') === 'true' });
      } else {
        res.writeHead(answer.statusCode, answer.headers);
        pipeline(answer.stream, res, () => undefined);
      }
    });
  } catch (err) {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const failed = failureAnswer(err, entry.view.name, options.breakerRetryAfterSeconds, logger);
    observe(plan, failed.status.code, started);
    writeStatus(res, failed.status, failed.retryAfterSeconds);
  }
}
