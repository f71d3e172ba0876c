import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import type { LockRenamer } from './leader-election.js';
import type { ClusterEntry } from './route-state.js';

/** The API server's answer as the proxy forwards it. */
export interface UpstreamResponse {
  statusCode: number;
  /** The body's declared length; undefined when the API server streams it (chunked). */
  contentLength: number | undefined;
  stream: Readable;
}

/**
 * Bodies up to this size are read whole and written with the response head in one go: one write to the client
 * instead of a head, body chunk(s) and end, each a system call (the bulk of the proxy's CPU, docs/proxy.md).
 */
const WHOLE_BODY_BYTES = 256 * 1024;

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
  const length = res.headers['content-length'];
  plan.onResponse(reply, { statusCode: res.statusCode, contentLength: typeof length === 'string' ? Number(length) : undefined, stream: res.body });
}

async function readBytes(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

/** Reads a whole (small) body: lock objects and their statuses. */
export async function readBody(stream: Readable): Promise<string> {
  return (await readBytes(stream)).toString('utf8');
}

/**
 * Sends the API server's body as it is. A body that ends within WHOLE_BODY_BYTES (a GET, most LISTs, whatever
 * their encoding) goes out whole with the head; a longer one streams, its first part included. Watches always
 * stream: their events must not wait.
 */
export async function sendBody(reply: FastifyReply, res: UpstreamResponse, options: { watch: boolean }): Promise<void> {
  if (options.watch || (res.contentLength !== undefined && res.contentLength > WHOLE_BODY_BYTES)) {
    reply.send(res.stream);
    return;
  }
  const chunks = res.stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  const head: Buffer[] = [];
  let size = 0;
  while (size <= WHOLE_BODY_BYTES) {
    const next = await chunks.next();
    if (next.done === true) {
      reply.send(head.length === 1 ? head[0]! : Buffer.concat(head, size));
      return;
    }
    head.push(next.value);
    size += next.value.length;
  }
  reply.send(Readable.from(streamOn(head, chunks), { objectMode: false }));
}

async function* streamOn(head: Buffer[], rest: AsyncIterator<Buffer>): AsyncGenerator<Buffer> {
  try {
    yield* head;
    for (let next = await rest.next(); next.done !== true; next = await rest.next()) yield next.value;
  } finally {
    // The client went away mid-body: stop reading from (and free) the API server's connection.
    await rest.return?.();
  }
}

/** Sends a lock's response with its name restored. */
export async function sendRestored(reply: FastifyReply, res: UpstreamResponse, renamer: LockRenamer): Promise<void> {
  const body = renamer.restoreBody(await readBody(res.stream));
  reply.removeHeader('content-length');
  await reply.send(body);
}
