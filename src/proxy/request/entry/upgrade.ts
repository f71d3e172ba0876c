import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { RouteController } from '../../routes/route-controller.js';
import { endWithStatus } from '../answer/send-status.js';
import { spliceUpgrade } from '../answer/spliced-upgrade.js';
import { isRefused, judgeRequest, refuse, type Judgement } from '../judgement/judge.js';
import { ruled, type RequestGuard } from '../judgement/rules-guard.js';
import { statusBody, tableChanged } from '../judgement/status.js';
import type { HeaderPolicy } from '../parse/index.js';
import { observe } from './observe.js';
import { answering } from './pipelined.js';

/** Whether a request head announces a body: an upgrade has none (see below). */
function announcesBody(rawHeaders: readonly string[]): boolean {
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    if (name === 'transfer-encoding' || (name === 'content-length' && rawHeaders[i + 1]!.trim() !== '0')) return true;
  }
  return false;
}

export interface UpgradeHandler {
  (req: IncomingMessage, socket: Duplex, clientHead: Buffer): void;
  /** Ends every upgrade in progress or spliced: they left the HTTP server, whose close does not reach them. */
  closeAll(): void;
}

export interface UpgradeOptions {
  controller: RouteController;
  logger: Logger;
  headers: HeaderPolicy;
  timeoutMs: number;
  /** Seconds a client is told to wait while a cluster's breaker is open. */
  breakerRetryAfterSeconds: number;
  guard?: RequestGuard | undefined;
}

/**
 * exec, attach and port-forward (SPDY or WebSocket upgrades of pods/<name>/<subresource>) are judged like any request
 * (judge.ts), CircuitBreaker and FaultInjection rules included; every other upgrade (h2c, a list or watch with an
 * `Upgrade` header) is refused, since the API server would serve it with no selector injected. A judged upgrade is
 * spliced to the API server (spliced-upgrade.ts).
 *
 * Refused too: an upgrade behind an unanswered request on its connection (Node hands the socket over at once, before
 * the API server would even read it; the connection is closed, as nothing can be answered in turn), and an upgrade
 * announcing a body (test/integration/proxy-client-gone.test.ts).
 */
export function createUpgradeHandler(options: UpgradeOptions): UpgradeHandler {
  const open = new Set<Duplex>();
  const handler = (req: IncomingMessage, socket: Duplex, clientHead: Buffer): void => {
    if (answering(req.socket as Socket)) {
      options.logger.warn({ url: req.url }, 'upgrade sent behind an unanswered request on its connection: connection closed');
      socket.destroy();
      return;
    }
    const started = performance.now();
    const judged = judgeRequest(
      options.controller.current,
      { method: req.method ?? 'GET', url: req.url ?? '/', upgrade: req.headers.upgrade, hasBody: announcesBody(req.rawHeaders) },
      'upgrade',
    );
    upgrade(options, judged, req, socket, clientHead, open, started).catch((err: unknown) => {
      options.logger.error({ err }, 'an upgrade failed in the proxy');
      socket.destroy();
    });
  };
  return Object.assign(handler, {
    closeAll: () => {
      for (const socket of open) socket.destroy();
    },
  });
}

/** Answers a refusal on the bare socket, or splices a judged upgrade to its cluster. */
async function upgrade(options: UpgradeOptions, judged: Judgement, req: IncomingMessage, socket: Duplex, clientHead: Buffer, open: Set<Duplex>, started: number): Promise<void> {
  const { controller } = options;
  let verdict = await ruled(options.guard, judged);
  if (!isRefused(verdict) && verdict.entry.breaker.opened) {
    const status = statusBody(503, 'ServiceUnavailable', `cluster "${verdict.cluster}" is failing: its circuit breaker is open`);
    verdict = refuse(verdict, status, options.breakerRetryAfterSeconds);
  }
  // The fence flag is set by a timer: a lease that ran out by the clock since its last tick ends the table here too.
  if (!isRefused(verdict) && !controller.stillServes(verdict.state)) verdict = refuse(verdict, tableChanged());
  if (isRefused(verdict)) {
    observe(verdict, verdict.status.code, started);
    endWithStatus(socket, verdict.status, verdict.retryAfterSeconds);
    return;
  }
  const plan = verdict;
  open.add(socket);
  spliceUpgrade({
    plan,
    req,
    socket,
    clientHead,
    controller,
    headers: options.headers,
    timeoutMs: options.timeoutMs,
    logger: options.logger,
    onAnswer: (code) => observe(plan, code, started),
    onClose: () => open.delete(socket),
  });
}
