import { connect as connectPlain, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { splitClusterPrefix } from './api-handler.js';
import { decide } from './enforce.js';
import { parseRequestInfo } from './request-info.js';
import type { RouteController } from './route-controller.js';
import { statusBody, type KubeStatus } from './status.js';

const HOP_BY_HOP = new Set(['host', 'authorization', 'proxy-authorization']);

function refuse(socket: Duplex, status: KubeStatus): void {
  const body = JSON.stringify(status);
  socket.end(
    `HTTP/1.1 ${status.code} ${status.reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/**
 * exec, attach and port-forward: the HTTP upgrade (SPDY or WebSocket) is checked against the shard like any
 * request, then the two connections are spliced, the proxy presenting its own TLS identity upstream.
 */
export function createUpgradeHandler(options: { controller: RouteController; logger: Logger }) {
  const { controller, logger } = options;
  return (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
    const state = controller.current;
    if (state === undefined) return refuse(socket, statusBody(503, 'ServiceUnavailable', 'the proxy has no route table yet'));
    const rawUrl = req.url ?? '/';
    const q = rawUrl.indexOf('?');
    const split = splitClusterPrefix(q < 0 ? rawUrl : rawUrl.slice(0, q));
    const query = q < 0 ? '' : rawUrl.slice(q);
    const entry = state.clusters.get(split.cluster ?? state.table.homeCluster);
    if (entry === undefined) return refuse(socket, statusBody(404, 'NotFound', `cluster "${split.cluster}" is not in the route table`));
    const decision = decide(parseRequestInfo(req.method ?? 'GET', split.path, new URLSearchParams(query)), entry.view, state.table.shard);
    if (decision.kind === 'deny') return refuse(socket, decision.body);
    if (entry.breaker.opened) return refuse(socket, statusBody(503, 'ServiceUnavailable', `cluster "${entry.view.name}" is failing: its circuit breaker is open`));

    const { upstream } = entry;
    const port = Number(upstream.server.port || (upstream.tls ? 443 : 80));
    const target: Socket = upstream.tls
      ? connectTls({ host: upstream.server.hostname, port, servername: upstream.server.hostname, ...upstream.tls })
      : connectPlain({ host: upstream.server.hostname, port });
    const lines = [`${req.method} ${upstream.upstreamPath(split.path)}${query} HTTP/1.1`, `host: ${upstream.server.host}`];
    if (upstream.authorization) lines.push(`authorization: ${upstream.authorization}`);
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i]!;
      if (!HOP_BY_HOP.has(name.toLowerCase())) lines.push(`${name}: ${req.rawHeaders[i + 1]}`);
    }
    target.once(upstream.tls ? 'secureConnect' : 'connect', () => {
      target.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) target.write(head);
      target.pipe(socket);
      socket.pipe(target);
    });
    const close = (err?: Error): void => {
      if (err) logger.warn({ err, cluster: entry.view.name }, 'upgraded connection failed');
      target.destroy();
      socket.destroy();
    };
    target.on('error', close);
    socket.on('error', close);
    target.on('close', () => socket.destroy());
    socket.on('close', () => target.destroy());
  };
}
