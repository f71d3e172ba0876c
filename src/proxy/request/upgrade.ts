import { request as httpRequest, type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { RouteController } from '../routes/route-controller.js';
import { decide } from './enforce.js';
import { isRefusal, keptRawHeaders, parseApiRequest, type HeaderPolicy } from './parse/index.js';
import { answering } from './pipelined.js';
import { endWithStatus, statusBody, statusFor } from './status.js';

/** The only requests upgraded: they stream to a container of one pod, judged by the pod's namespace. */
const STREAMING_SUBRESOURCES = new Set(['exec', 'attach', 'portforward']);
/** The protocols kubectl and client-go use for them. */
const STREAMING_PROTOCOL = /^(spdy\/3\.1|websocket)$/iu;
/** The upgrade's own headers, kept although hop-by-hop. */
const UPGRADE_HEADERS = new Set(['connection', 'upgrade']);
/** Response headers not relayed when the API server refuses the upgrade (the body is sent until the connection closes). */
const FRAMING = new Set(['connection', 'transfer-encoding', 'keep-alive']);

function head(statusLine: string, rawHeaders: readonly string[], skip: ReadonlySet<string>): string {
  const lines = [statusLine];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if (!skip.has(rawHeaders[i]!.toLowerCase())) lines.push(`${rawHeaders[i]}: ${rawHeaders[i + 1]}`);
  }
  return `${lines.join('\r\n')}\r\n`;
}

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

/**
 * exec, attach and port-forward (SPDY or WebSocket upgrades of pods/<name>/<subresource>) are parsed and judged
 * like any request; every other upgrade (h2c, a list or watch with an `Upgrade` header) is refused, since the API
 * server would serve it with no selector injected. The client's connection is spliced to the API server's only
 * after the API server switched protocols (101): an answer without a switch is relayed and both connections end,
 * so no further request can ride the spliced connection unjudged. A session is registered from its judgement on: a
 * table under which its request would be refused (the namespace revoked, the proxy fenced, the cluster removed) ends
 * it before that table is acknowledged, answered or not, so a shard that lost a pod keeps no shell in it.
 *
 * Refused too, as an attacker probe found them (session 19): an upgrade behind an unanswered request on its
 * connection (Node hands the socket over at once, before the API server would even read it; the connection is
 * closed, as nothing can be answered in turn), and an upgrade announcing a body (the API server waits for the body,
 * which is sent only after the switch: both sides would wait for good).
 */
export function createUpgradeHandler(options: { controller: RouteController; logger: Logger; headers: HeaderPolicy; timeoutMs: number }): UpgradeHandler {
  const { controller, logger } = options;
  const open = new Set<Duplex>();
  const handler = (req: IncomingMessage, socket: Duplex, clientHead: Buffer): void => {
    if (answering(req.socket as Socket)) {
      logger.warn({ url: req.url }, 'upgrade sent behind an unanswered request on its connection: connection closed');
      socket.destroy();
      return;
    }
    if (announcesBody(req.rawHeaders)) return endWithStatus(socket, statusFor(400, 'an upgrade request carries no body (Content-Length or Transfer-Encoding)'));
    const state = controller.current;
    if (state === undefined) return endWithStatus(socket, statusBody(503, 'ServiceUnavailable', 'the proxy has no route table yet'));
    // As on the API route: a proxy that cannot tell what it owns answers 503, not as a shard owning nothing.
    if (state.unsure !== undefined) return endWithStatus(socket, statusBody(503, 'ServiceUnavailable', state.unsure));
    const parsed = parseApiRequest(req.method ?? 'GET', req.url ?? '/');
    if (isRefusal(parsed)) return endWithStatus(socket, statusFor(parsed.code, parsed.message));
    const { info } = parsed;
    const protocol = req.headers.upgrade ?? '';
    const streaming =
      info.kind === 'resource' && info.group === '' && info.resource === 'pods' && STREAMING_SUBRESOURCES.has(info.subresource ?? '') && STREAMING_PROTOCOL.test(protocol);
    if (!streaming) {
      return endWithStatus(socket, statusFor(400, `only exec, attach and port-forward are upgraded through the proxy (SPDY/3.1 or WebSocket), not "${protocol}" on ${parsed.path}: send the request without Upgrade`));
    }
    const entry = state.clusters.get(parsed.cluster ?? state.table.homeCluster);
    if (entry === undefined) return endWithStatus(socket, statusFor(404, `cluster "${parsed.cluster}" is not in the route table`));
    const decision = decide(info, entry.view, state.table.shard);
    if (decision.kind === 'deny') return endWithStatus(socket, decision.body);
    if (entry.breaker.opened) return endWithStatus(socket, statusBody(503, 'ServiceUnavailable', `cluster "${entry.view.name}" is failing: its circuit breaker is open`));
    // The fence flag is set by a timer: a lease that ran out by the clock since its last tick ends the table here too.
    if (!controller.stillServes(state)) return endWithStatus(socket, statusFor(503, 'the lease of the route table this request was judged by ended; retry'));

    const { upstream } = entry;
    const headers: OutgoingHttpHeaders = { host: upstream.server.host };
    for (const [name, value] of keptRawHeaders(req.rawHeaders, options.headers, UPGRADE_HEADERS)) {
      const key = name.toLowerCase();
      const previous = headers[key];
      headers[key] = previous === undefined ? value : [...(Array.isArray(previous) ? previous : [String(previous)]), value];
    }
    if (upstream.authorization) headers.authorization = upstream.authorization;
    const query = parsed.query.toString();
    const target = {
      host: upstream.server.hostname,
      port: Number(upstream.server.port || (upstream.tls ? 443 : 80)),
      method: req.method,
      path: `${upstream.upstreamPath(parsed.path)}${query === '' ? '' : `?${query}`}`,
      headers,
      agent: false as const,
    };
    const out: ClientRequest = upstream.tls
      ? // SNI carries names only (RFC 6066); the certificate is checked against the host, an IP included, either way.
        httpsRequest({ ...target, ...(isIP(upstream.server.hostname) ? {} : { servername: upstream.server.hostname }), ...upstream.tls })
      : httpRequest(target);
    open.add(socket);
    let answered = false;
    let spliced: Duplex | undefined;
    // Ends the session wherever it stands: the request on its way to the API server, or both spliced connections.
    const end = (): void => {
      out.destroy();
      spliced?.destroy();
      socket.destroy();
    };
    // From its judgement on: a table under which this request would be refused ends it, answered or not, before that
    // table is acknowledged (an attacker probe, session 19: a kubelet's 101 came after the revoking table's ack).
    const unregister = controller.registerSession({ cluster: entry.view.name, admittedBy: (view, shard) => decide(info, view, shard).kind !== 'deny', end });
    const timer = setTimeout(() => {
      out.destroy();
      endWithStatus(socket, statusFor(504, `cluster "${entry.view.name}" API server did not answer the upgrade within ${options.timeoutMs} ms`));
    }, options.timeoutMs);
    const answer = (): void => {
      answered = true;
      clearTimeout(timer);
    };
    const fail = (err: Error): void => {
      logger.warn({ err, cluster: entry.view.name }, 'upgraded connection failed');
      if (!answered) endWithStatus(socket, statusFor(503, `cluster "${entry.view.name}" API server unreachable: ${err.message}`));
      else socket.destroy();
    };
    out.on('error', fail);
    out.on('upgrade', (res: IncomingMessage, upstreamSocket: Duplex, upstreamHead: Buffer) => {
      answer();
      spliced = upstreamSocket;
      // Ended while the API server answered: nothing of the client's reaches it.
      if (socket.destroyed) {
        upstreamSocket.destroy();
        return;
      }
      socket.write(`${head(`HTTP/1.1 101 ${res.statusMessage ?? 'Switching Protocols'}`, res.rawHeaders, new Set())}\r\n`);
      if (upstreamHead.length > 0) socket.write(upstreamHead);
      if (clientHead.length > 0) upstreamSocket.write(clientHead);
      upstreamSocket.pipe(socket);
      socket.pipe(upstreamSocket);
      const close = (): void => {
        upstreamSocket.destroy();
        socket.destroy();
      };
      upstreamSocket.on('error', close);
      socket.on('error', close);
      upstreamSocket.on('close', close);
      socket.on('close', close);
    });
    out.on('response', (res: IncomingMessage) => {
      answer();
      socket.write(`${head(`HTTP/1.1 ${res.statusCode ?? 502} ${res.statusMessage ?? ''}`, res.rawHeaders, FRAMING)}connection: close\r\n\r\n`);
      res.pipe(socket);
      res.on('error', () => socket.destroy());
    });
    socket.on('error', () => out.destroy());
    // A client gone before the answer: nothing else would end the API server's side.
    socket.on('close', () => {
      open.delete(socket);
      unregister();
      clearTimeout(timer);
      if (!answered) out.destroy();
    });
    out.end();
  };
  return Object.assign(handler, {
    closeAll: () => {
      for (const socket of open) socket.destroy();
    },
  });
}
