import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { ProxyMetrics } from '../../metrics/index.js';
import { judge, type RestCall, type RuleClock, type RuleOutcome, type RuleSet } from '../rules/index.js';

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
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      res.writeHead(400, { 'content-type': 'text/plain' }).end('this is an HTTP proxy: send absolute-form requests\n');
      return;
    }
    const method = (req.method ?? 'GET').toUpperCase();
    const outcome = await decide({ kind: 'rest', method, host: target.hostname, path: target.pathname, url: target.href });
    if (outcome.action === 'deny') {
      const { head, body } = denial(outcome);
      res.writeHead(outcome.code, head).end(body);
      return;
    }
    const headers = { ...req.headers };
    delete headers['proxy-connection'];
    delete headers['proxy-authorization'];
    const upstream = httpRequest(target, { method, headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    upstream.on('error', (err) => {
      logger.warn({ err, host: target.host }, 'external call failed');
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end();
    });
    req.pipe(upstream);
  };

  const onConnect = async (req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> => {
    const [host = '', port = '443'] = (req.url ?? '').split(':');
    const outcome = await decide({ kind: 'rest', method: 'CONNECT', host, path: undefined, url: `https://${host}/` });
    if (outcome.action === 'deny') {
      const { head: headers, body } = denial(outcome);
      const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}`);
      socket.end(`HTTP/1.1 ${outcome.code} Refused\r\n${lines.join('\r\n')}\r\n\r\n${body}`);
      return;
    }
    const tunnel = connect({ host, port: Number(port) }, () => {
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
  };

  const server: Server = createServer((req, res) => void onRequest(req, res));
  server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => void onConnect(req, socket, head));
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
