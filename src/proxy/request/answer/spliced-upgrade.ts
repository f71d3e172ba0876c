import { request as httpRequest, type ClientRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { RouteController } from '../../routes/route-controller.js';
import { decide } from '../judgement/enforce.js';
import type { Plan } from '../judgement/judge.js';
import { statusFor } from '../judgement/status.js';
import { keptRawHeaders, type HeaderPolicy } from '../parse/index.js';
import { endWithStatus } from './send-status.js';

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

export interface SpliceOptions {
  plan: Plan;
  req: IncomingMessage;
  socket: Duplex;
  clientHead: Buffer;
  controller: RouteController;
  headers: HeaderPolicy;
  timeoutMs: number;
  logger: Logger;
  /** Called with the API server's answer: 101, or the code of the answer it gave instead. */
  onAnswer(code: number): void;
  /** Called once the client's connection closed. */
  onClose(): void;
}

/**
 * Sends a judged upgrade to its cluster and splices the client's connection to the API server's once the API server
 * switched protocols (101): an answer without a switch is relayed and both connections end, so no further request
 * can ride the spliced connection unjudged. The session is registered from its judgement on: a table under which its
 * request would be refused (the namespace revoked, the proxy fenced, the cluster removed) ends it before that table
 * is acknowledged, answered or not, so a shard that lost a pod keeps no shell in it.
 */
export function spliceUpgrade(options: SpliceOptions): void {
  const { plan, req, socket, clientHead, controller, logger, onAnswer } = options;
  const { entry, info } = plan;
  const { upstream } = entry;
  const headers: OutgoingHttpHeaders = { host: upstream.server.host };
  for (const [name, value] of keptRawHeaders(req.rawHeaders, options.headers, UPGRADE_HEADERS)) {
    const key = name.toLowerCase();
    const previous = headers[key];
    headers[key] = previous === undefined ? value : [...(Array.isArray(previous) ? previous : [String(previous)]), value];
  }
  if (upstream.authorization) headers.authorization = upstream.authorization;
  const query = plan.query.toString();
  const target = {
    host: upstream.server.hostname,
    port: Number(upstream.server.port || (upstream.tls ? 443 : 80)),
    method: req.method,
    path: `${upstream.upstreamPath(plan.path)}${query === '' ? '' : `?${query}`}`,
    headers,
    agent: false as const,
  };
  const out: ClientRequest = upstream.tls
    ? // SNI carries names only (RFC 6066); the certificate is checked against the host, an IP included, either way.
      httpsRequest({ ...target, ...(isIP(upstream.server.hostname) ? {} : { servername: upstream.server.hostname }), ...upstream.tls })
    : httpRequest(target);
  let answered = false;
  let spliced: Duplex | undefined;
  // Ends the session wherever it stands: the request on its way to the API server, or both spliced connections.
  const end = (): void => {
    out.destroy();
    spliced?.destroy();
    socket.destroy();
  };
  // From its judgement on: a table under which this request would be refused ends it, answered or not, before that
  // table is acknowledged: a kubelet's 101 can come after the revoking table's acknowledgement
  // (test/integration/proxy-client-gone.test.ts).
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
    onAnswer(101);
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
    onAnswer(res.statusCode ?? 502);
    socket.write(`${head(`HTTP/1.1 ${res.statusCode ?? 502} ${res.statusMessage ?? ''}`, res.rawHeaders, FRAMING)}connection: close\r\n\r\n`);
    res.pipe(socket);
    res.on('error', () => socket.destroy());
  });
  socket.on('error', () => out.destroy());
  // A client gone before the answer: nothing else would end the API server's side.
  socket.on('close', () => {
    options.onClose();
    unregister();
    clearTimeout(timer);
    if (!answered) out.destroy();
  });
  out.end();
}
