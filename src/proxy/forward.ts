import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { LockRenamer } from './leader-election.js';
import type { ClusterEntry } from './route-state.js';

/** The API server's answer as the proxy forwards it. */
export interface UpstreamResponse {
  statusCode: number;
  stream: Readable;
}

export interface ForwardPlan {
  entry: ClusterEntry;
  /** Path on the API server, without the query. */
  path: string;
  query: string;
  /** A replacement body (a renamed lock); undefined = the client's body streams through. */
  body: string | undefined;
  /** Forces a JSON answer so the proxy can read watch events (clients that ask for protobuf accept JSON too). */
  json: boolean;
  /** Called once the API server's response head arrived; it sends the reply. */
  onResponse(reply: FastifyReply, res: UpstreamResponse): void;
}

/**
 * Hop-by-hop headers (RFC 9110 7.6.1) and those the proxy sets itself: never copied from one side to the other.
 * undici also refuses most of them in a request.
 */
const NOT_FORWARDED = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'expect', 'host', 'authorization']);

/** Request headers for the API server: the client's, minus hop-by-hop ones and those its Connection header names. */
function upstreamHeaders(request: FastifyRequest, plan: ForwardPlan): Record<string, string | string[]> {
  const incoming = request.headers;
  const named = typeof incoming.connection === 'string' ? incoming.connection.toLowerCase().split(',').map((h) => h.trim()) : [];
  const headers: Record<string, string | string[]> = {};
  for (const name in incoming) {
    const value = incoming[name];
    if (value === undefined || NOT_FORWARDED.has(name) || (named.length > 0 && named.includes(name))) continue;
    headers[name] = value;
  }
  const { upstream } = plan.entry;
  headers.host = upstream.server.host;
  // The operator never authenticates to the proxy; the proxy presents its own credentials per cluster.
  if (upstream.authorization !== undefined) headers.authorization = upstream.authorization;
  if (plan.json) headers.accept = 'application/json';
  if (plan.body !== undefined) {
    headers['content-length'] = String(Buffer.byteLength(plan.body));
    headers['content-type'] = incoming['content-type'] ?? 'application/json';
  }
  return headers;
}

/** Response headers for the client: the API server's, minus hop-by-hop ones. */
function clientHeaders(headers: IncomingHttpHeaders): IncomingHttpHeaders {
  const out: IncomingHttpHeaders = {};
  for (const name in headers) {
    if (NOT_FORWARDED.has(name)) continue;
    out[name] = headers[name];
  }
  return out;
}

/**
 * Sends one request straight to the cluster's pool (no per-request URL parsing or retry wrapper: retries are the
 * breaker's business). Resolves once the response head is handed to `onResponse`; rejects when unreachable.
 */
export async function forward(request: FastifyRequest, reply: FastifyReply, plan: ForwardPlan): Promise<void> {
  const { upstream } = plan.entry;
  const query = plan.query === '' ? '' : `?${plan.query}`;
  const clientBody = request.body as Readable | undefined | null;
  const res = await upstream.pool.request({
    method: request.method as 'GET',
    path: `${upstream.pathPrefix}${plan.path}${query}`,
    headers: upstreamHeaders(request, plan),
    body: plan.body ?? clientBody ?? null,
  });
  // The client went away while the API server was answering: nothing to send, free the connection.
  if (request.raw.socket?.destroyed === true) {
    res.body.destroy();
    return;
  }
  reply.code(res.statusCode).headers(clientHeaders(res.headers));
  plan.onResponse(reply, { statusCode: res.statusCode, stream: res.body });
}

/** Reads a whole (small) body: lock objects and their statuses. */
export async function readBody(stream: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  return Buffer.concat(chunks).toString('utf8');
}

/** Sends a lock's response with its name restored. */
export async function sendRestored(reply: FastifyReply, res: UpstreamResponse, renamer: LockRenamer): Promise<void> {
  const body = renamer.restoreBody(await readBody(res.stream));
  reply.removeHeader('content-length');
  await reply.send(body);
}
