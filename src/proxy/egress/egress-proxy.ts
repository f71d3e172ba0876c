import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { ProxyMetrics } from '../../metrics/index.js';
import { HOP_BY_HOP } from '../request/parse/index.js';
import { judge, type RestCall, type RuleClock, type RuleOutcome, type RuleSet } from '../rules/index.js';
import { connectTarget, requestTarget, urlHost } from './egress-target.js';

/** The end-to-end headers of a request or answer: hop-by-hop ones and those its `Connection` names left out. */
function endToEnd(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const named = String(headers.connection ?? '').toLowerCase().split(',').map((name) => name.trim());
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !HOP_BY_HOP.has(name) && !named.includes(name)));
}

export interface EgressProxy {
  url: string;
  close(): Promise<void>;
}

function denial(outcome: RuleOutcome & { action: 'deny' }): { head: Record<string, string>; body: string } {
  const body = JSON.stringify({ message: outcome.message, code: outcome.code });
  const head: Record<string, string> = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) };
  if (outcome.retryAfterSeconds !== undefined) head['retry-after'] = String(outcome.retryAfterSeconds);
  return { head, body };
}

/**
 * The HTTP proxy an operator's external REST calls go through (it sets HTTP_PROXY/HTTPS_PROXY to this port):
 * each call is judged by the CircuitBreaker and FaultInjection rules before it leaves. A plain-http call is
 * judged by method and full URL; an https call arrives as a CONNECT tunnel and can only be judged by host
 * (its method is CONNECT, its URL `https://host/`).
 */
export async function startEgressProxy(options: {
  listen: { host: string; port: number };
  rules: () => RuleSet;
  clock: RuleClock;
  metrics: ProxyMetrics;
  logger: Logger;
}): Promise<EgressProxy> {
  const { rules, clock, metrics, logger } = options;
  const decide = async (call: RestCall): Promise<RuleOutcome> => {
    const outcome = judge(rules(), call, clock, metrics);
    if (outcome.delayMs > 0) await sleep(outcome.delayMs);
    return outcome;
  };

  const onRequest = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const target = requestTarget(req.url ?? '');
    if ('refused' in target) {
      res.writeHead(400, { 'content-type': 'text/plain' }).end(`${target.refused}\n`);
      return;
    }
    const { url } = target;
    const method = (req.method ?? 'GET').toUpperCase();
    const outcome = await decide({ kind: 'rest', method, host: target.host, path: url.pathname, url: url.href });
    if (outcome.action === 'deny') {
      const { head, body } = denial(outcome);
      res.writeHead(outcome.code, head).end(body);
      return;
    }
    // The host judged is the host named: a client's own Host header would send the call to another virtual host.
    const upstream = httpRequest(url, { method, headers: { ...endToEnd(req.headers), host: url.host } }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, endToEnd(answer.headers));
      answer.pipe(res);
    });
    upstream.on('error', (err) => {
      logger.warn({ err, host: url.host }, 'external call failed');
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end();
    });
    req.on('error', () => upstream.destroy());
    req.pipe(upstream);
  };

  const onConnect = async (req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> => {
    // Node takes its own error listener off the socket before handing it over: a reset would end the process.
    socket.on('error', () => socket.destroy());
    const target = connectTarget(req.url ?? '');
    if ('refused' in target) {
      socket.end(`HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\n\r\n${target.refused}\n`);
      return;
    }
    const outcome = await decide({ kind: 'rest', method: 'CONNECT', host: target.host, path: undefined, url: `https://${urlHost(target.host)}/` });
    if (socket.destroyed) return;
    if (outcome.action === 'deny') {
      const { head: headers, body } = denial(outcome);
      const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}`);
      socket.end(`HTTP/1.1 ${outcome.code} Refused\r\n${lines.join('\r\n')}\r\n\r\n${body}`);
      return;
    }
    const tunnel = connect({ host: target.host, port: target.port }, () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) tunnel.write(head);
      tunnel.pipe(socket);
      socket.pipe(tunnel);
    });
    const close = (): void => {
      tunnel.destroy();
      socket.destroy();
    };
    tunnel.on('error', close);
    socket.on('error', close);
    socket.on('close', close);
  };

  // A call the handlers did not foresee fails alone: an unhandled rejection would end the whole sidecar.
  const failed = (err: unknown, end: () => void): void => {
    logger.error({ err }, 'egress call failed in the proxy');
    end();
  };
  const server: Server = createServer((req, res) => void onRequest(req, res).catch((err: unknown) => failed(err, () => res.destroy())));
  server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => void onConnect(req, socket, head).catch((err: unknown) => failed(err, () => socket.destroy())));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.listen.port, options.listen.host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://${address.address}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
