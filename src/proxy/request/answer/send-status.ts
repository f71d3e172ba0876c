import type { FastifyReply } from 'fastify';
import type { ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { KubeStatus } from '../judgement/status.js';

/** Answers with `status` as a Kubernetes Status body, with `Retry-After` when given. */
export function sendStatus(reply: FastifyReply, status: KubeStatus, retryAfterSeconds?: number): FastifyReply {
  if (retryAfterSeconds !== undefined) reply.header('retry-after', String(retryAfterSeconds));
  return reply.code(status.code).type('application/json').send(JSON.stringify(status));
}

/** The same answer on Node's own response, for a request no fastify reply serves (entry/watch-path.ts). */
export function writeStatus(res: ServerResponse, status: KubeStatus, retryAfterSeconds?: number): void {
  const body = JSON.stringify(status);
  res.writeHead(status.code, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    ...(retryAfterSeconds === undefined ? {} : { 'retry-after': String(retryAfterSeconds) }),
  });
  res.end(body);
}

/**
 * Answers with `status` on a bare socket and closes it: for a connection no HTTP response object serves (an upgrade
 * refused, a request Node's server refused before any route). The connection carries nothing after it.
 */
export function endWithStatus(socket: Duplex, status: KubeStatus, retryAfterSeconds?: number): void {
  const body = JSON.stringify(status);
  const retry = retryAfterSeconds === undefined ? '' : `retry-after: ${retryAfterSeconds}\r\n`;
  socket.end(
    `HTTP/1.1 ${status.code} ${status.reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${retry}connection: close\r\n\r\n${body}`,
  );
}
