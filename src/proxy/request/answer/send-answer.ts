import type { FastifyReply } from 'fastify';
import type { OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { UnjudgedListError } from '../../../errors.js';
import type { RouteController } from '../../routes/route-controller.js';
import { continueBinding, type Plan } from '../judgement/judge.js';
import { statusFor } from '../judgement/status.js';
import type { RequestInfo, ResourceRequest } from '../parse/index.js';
import { sendRestored, type UpstreamResponse } from './forward.js';
import { acceptsGzip, sendGunzipped } from './gzip-answer.js';
import { sendJudgedObject } from './judged-object.js';
import { judgeList } from './list-filter.js';
import { sendStatus } from './send-status.js';
import { relayWatch } from './watch-relay.js';
import { sendWhole } from './whole-body.js';

/**
 * Whether the API server's answer to a request ends by itself, soon: an object or a list, whatever the verb, but not
 * a watch, nor a subresource other than status (a followed log, a proxied connection stream for as long as they last).
 */
function endsByItself(info: RequestInfo): boolean {
  return info.kind === 'resource' && info.verb !== 'watch' && (info.subresource === undefined || info.subresource === 'status');
}

/**
 * The encoding asked of the API server. Every answer the proxy reads must come unencoded, a sharded watch's events
 * included. An answer it passes on to a client that takes no encoding is asked for as gzip and decoded: cheaper for a
 * long list (gzip-answer.ts).
 */
export function answerEncoding(plan: Plan, method: string, acceptEncoding: string | string[] | undefined): 'identity' | 'gzip' | undefined {
  if (plan.identity) return 'identity';
  return method === 'GET' && endsByItself(plan.info) && !acceptsGzip(acceptEncoding) ? 'gzip' : undefined;
}

/** Sends the API server's answer to a plan as the plan's answer mode says (judge.ts, `AnswerMode`). */
export function sendAnswer(options: { plan: Plan; reply: FastifyReply; res: UpstreamResponse; method: string; encoding: 'identity' | 'gzip' | undefined; controller: RouteController; maxBodyBytes: number }): void {
  const { plan, reply, res } = options;
  const { info, entry } = plan;
  const resource = info.kind === 'resource' ? info : undefined;
  const judged = res.statusCode === 200 && resource !== undefined;
  const renamer = plan.state.renamer;
  if (plan.answer === 'lock' && renamer) {
    sendRestored(reply, res, renamer, options.maxBodyBytes).catch((err: unknown) => reply.send(err));
  } else if (plan.answer === 'object' && judged) {
    sendJudgedObject({ reply, res, entry, info: resource, shard: plan.state.table.shard });
  } else if (plan.answer === 'list' && judged && plan.selection) {
    sendJudgedList(reply, res, plan, resource, plan.selection.shardSelector);
  } else if (plan.answer === 'filtered-watch' && judged) {
    relayFilteredWatch(reply, res, plan, resource, options.controller);
  } else if (plan.answer === 'watch' && judged) {
    sendWatch(reply, res.stream);
  } else if (options.encoding === 'gzip' && reply.getHeader('content-encoding') === 'gzip') {
    sendGunzipped(reply, res);
  } else if (endsByItself(info) && options.method !== 'HEAD') {
    // (A HEAD's answer has no body but keeps the length of the one it stands for: it passes as it is.)
    sendWhole(reply, res);
  } else {
    reply.send(res.stream);
  }
}

/**
 * Sends a list judged by the view it was sent under: untouched when the API server echoed the shard selector,
 * otherwise filtered by the proxy; an answer it cannot read is refused (502), never passed on.
 */
function sendJudgedList(reply: FastifyReply, res: UpstreamResponse, plan: Plan, info: ResourceRequest, shardSelector: string | undefined): void {
  const { entry } = plan;
  const fail = (reason: string): void => {
    res.stream.destroy();
    reply.removeHeader('content-length').removeHeader('content-encoding');
    sendStatus(reply, statusFor(502, reason));
  };
  if (reply.getHeader('content-encoding') !== undefined) return fail('the proxy must read this list and the API server sent it encoded');
  const judge = entry.view.eventJudge(info.group, info.resource);
  judgeList(res.stream, {
    expected: judge.echoSuffices ? shardSelector : undefined,
    admit: judge.admits,
    labelKeys: judge.labelKeys,
    onFiltered: (unconfirmed) => (unconfirmed ? entry.metrics.listsFiltered.noEcho : entry.metrics.listsFiltered.unlabelled).inc(),
    sealContinue: (token) => plan.state.continueTokens.seal(token, continueBinding(plan)),
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
function relayFilteredWatch(reply: FastifyReply, res: UpstreamResponse, plan: Plan, info: ResourceRequest, controller: RouteController): void {
  reply.hijack();
  // The headers fastify holds for the reply, as its own sending writes them.
  relayWatch({
    res: reply.raw,
    answer: { statusCode: res.statusCode, headers: reply.getHeaders() as OutgoingHttpHeaders, stream: res.stream },
    entry: plan.entry,
    info,
    controller,
    bookmarks: plan.query.get('allowWatchBookmarks') === 'true',
  });
}
