import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { BodyTooLargeError } from '../../../errors.js';
import type { RouteController } from '../../routes/route-controller.js';
import { failureAnswer, forward } from '../answer/forward.js';
import { answerEncoding, sendAnswer } from '../answer/send-answer.js';
import { sendStatus } from '../answer/send-status.js';
import { isRefused, judgeBody, judgeRequest, refuse, type Plan, type Refusal, type RequestHead } from '../judgement/judge.js';
import { judgeWriteByObject } from '../judgement/object-write.js';
import { ruled, type RequestGuard } from '../judgement/rules-guard.js';
import { statusFor, tableChanged } from '../judgement/status.js';
import { isWrite, readBoundedBytes, type HeaderPolicy } from '../parse/index.js';
import { observe } from './observe.js';
import { isPipelined, untilTurn } from './pipelined.js';
import { takeJudgement } from './watch-path.js';

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
  guard?: RequestGuard | undefined;
}

/**
 * The proxy's one route: judge the request as the API server will read it, enforce the shard, forward what was judged.
 * The route itself is synchronous and every answer goes by `reply` alone: an async route would have fastify wait on
 * the reply as a promise, which holds listeners on each response until it ends (a watch's, for as long as it lasts).
 */
export function createApiHandler(options: ApiHandlerOptions): (request: FastifyRequest, reply: FastifyReply) => void {
  return (request, reply) => {
    handleApiRequest(options, request, reply).catch((err: unknown) => reply.send(err));
  };
}

/** One request on fastify's route: judged once (or taken as the watch path judged it), then carried out. */
async function handleApiRequest(options: ApiHandlerOptions, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const { controller, logger, requests } = options;
  // Judged and forwarded at its turn, under the table then in force; never when its client left before.
  if (isPipelined(reply.raw) && !(await untilTurn(request.raw, reply.raw))) return;
  const started = performance.now();
  const head: RequestHead = {
    method: request.method,
    url: request.raw.url ?? '/',
    contentType: request.headers['content-type'],
    accept: request.headers.accept,
    hasBody: request.body !== undefined && request.body !== null,
  };
  let judged = await ruled(options.guard, takeJudgement(request.raw) ?? judgeRequest(controller.current, head, 'plain'));
  if (!isRefused(judged) && judged.read !== undefined) {
    const body = await readBody(request, reply, requests.maxBodyBytes, judged);
    judged = Buffer.isBuffer(body) ? judgeBody(judged, body, head) : body;
  }
  if (!isRefused(judged) && judged.objectWrite !== undefined) {
    const body = await readBody(request, reply, requests.maxBodyBytes, judged);
    judged = Buffer.isBuffer(body) ? await judgeWriteByObject(judged, body, head.contentType, logger) : body;
  }
  if (!isRefused(judged) && !controller.stillServes(judged.state)) judged = refuse(judged, tableChanged());
  if (isRefused(judged)) {
    observe(judged, judged.status.code, started);
    sendStatus(reply, judged.status, judged.retryAfterSeconds);
    return;
  }
  await forwardPlan(options, request, reply, judged, started);
}

/** The client's body, at most `maxBytes`; a larger one is refused with 413. */
async function readBody(request: FastifyRequest, reply: FastifyReply, maxBytes: number, plan: Plan): Promise<Buffer | Refusal> {
  if (request.body === undefined || request.body === null) return Buffer.alloc(0);
  try {
    return await readBoundedBytes(request.body as Readable, maxBytes, request.headers['content-length']);
  } catch (err) {
    if (err instanceof BodyTooLargeError) {
      // The rest of the body stays unread: the connection cannot carry another request.
      reply.header('connection', 'close');
      return refuse(plan, statusFor(413, err.message));
    }
    throw err;
  }
}

/** Sends a plan to its cluster through the cluster's breaker, and its answer on as the plan says. */
async function forwardPlan(options: ApiHandlerOptions, request: FastifyRequest, reply: FastifyReply, plan: Plan, started: number): Promise<void> {
  const { controller, requests } = options;
  const { entry, info } = plan;
  const encoding = answerEncoding(plan, request.method, request.headers['accept-encoding']);
  try {
    const sent = entry.breaker.fire(() =>
      forward(request, reply, {
        entry,
        path: plan.path,
        query: plan.query.toString(),
        body: plan.body,
        contentType: plan.contentType,
        accept: plan.accept,
        encoding,
        watch: info.kind === 'resource' && info.verb === 'watch',
        headers: requests,
        onResponse: (out, res) => {
          observe(plan, res.statusCode, started);
          sendAnswer({ plan, reply: out, res, method: request.method, encoding, controller, maxBodyBytes: requests.maxBodyBytes });
        },
      }),
    );
    await (info.kind === 'resource' && isWrite(info.verb) ? controller.trackWrite(sent) : sent);
  } catch (err) {
    if (reply.sent) return;
    const failed = failureAnswer(err, plan.cluster, options.breakerRetryAfterSeconds, options.logger);
    sendStatus(reply, failed.status, failed.retryAfterSeconds);
    observe(plan, reply.statusCode, started);
  }
}
