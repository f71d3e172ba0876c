import type {} from '@fastify/reply-from';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { constants } from 'node:http2';
import type { Readable } from 'node:stream';
import type { LockRenamer } from '../routes/leader-election.js';
import type { ClusterEntry } from '../routes/route-state.js';
import type { Http2WatchPool } from '../upstream/http2-watches.js';
import { ClientRequestError, CtrlmeshError, ErrorCodes } from '../../errors.js';
import { readBoundedBody, stripHeaders, type HeaderPolicy } from './parse/index.js';

/** The upstream answer reply-from hands over. */
export interface UpstreamResponse {
  statusCode: number;
  stream: Readable;
}

export interface ForwardPlan {
  entry: ClusterEntry;
  /** Path on the API server, without the query: the canonical path the proxy judged. */
  path: string;
  /** The query the proxy judged, serialized. */
  query: string;
  /** A replacement body (read to be judged, or a renamed lock); undefined = the client's body streams through. */
  body: string | undefined;
  /** The replacement body's type, when the proxy changed it (default: the client's). */
  contentType?: string | undefined;
  /** Replaces the client's Accept (watches the proxy filters must be JSON). */
  accept: string | undefined;
  /**
   * `identity`: asks for an unencoded answer, which the proxy reads. `gzip`: asks for gzip for a client that takes no
   * encoding, and the proxy decodes it. Absent: the client's Accept-Encoding.
   */
  encoding?: 'identity' | 'gzip' | undefined;
  /** A watch: sent on the cluster's watch connections (HTTP/2 streams where the API server offers them). */
  watch: boolean;
  headers: HeaderPolicy;
  /** Called once the API server's response head arrived; it sends the reply. */
  onResponse(reply: FastifyReply, res: UpstreamResponse): void;
}

/** Retries are the breaker's business; reply-from would otherwise retry GETs on 503. */
const noRetry = (): null => null;

/**
 * Sends one request to a cluster; resolves on an answer, rejects when unreachable. A watch without a body goes as a
 * stream of the cluster's HTTP/2 connections where the API server offers them, everything else through reply-from.
 */
export function forward(request: FastifyRequest, reply: FastifyReply, plan: ForwardPlan): Promise<void> {
  const watches = plan.watch && plan.body === undefined && request.body == null ? plan.entry.upstream.http2Watches() : undefined;
  return watches === undefined ? forwardFrom(request, reply, plan) : forwardStream(request, reply, plan, watches);
}

/** The headers the API server gets: the client's that may cross, with the proxy's credentials and the plan's changes. */
function upstreamHeaders(headers: Record<string, string | string[] | undefined>, plan: ForwardPlan): void {
  const { upstream } = plan.entry;
  stripHeaders(headers, plan.headers);
  // The operator never authenticates to the proxy; the proxy presents its own credentials per cluster.
  if (upstream.authorization !== undefined) headers.authorization = upstream.authorization;
  if (plan.accept !== undefined) headers.accept = plan.accept;
  if (plan.encoding === 'identity') delete headers['accept-encoding'];
  else if (plan.encoding === 'gzip') headers['accept-encoding'] = 'gzip';
}

function forwardFrom(request: FastifyRequest, reply: FastifyReply, plan: ForwardPlan): Promise<void> {
  const { upstream } = plan.entry;
  return new Promise((resolve, reject) => {
    reply.from(`${upstream.virtualBase}${upstream.upstreamPath(plan.path)}`, {
      queryString: () => plan.query,
      ...(plan.body === undefined ? {} : { body: plan.body, contentType: plan.contentType ?? request.headers['content-type'] ?? 'application/json' }),
      retryDelay: noRetry,
      rewriteRequestHeaders: (_req, headers) => {
        upstreamHeaders(headers, plan);
        headers.host = upstream.server.host;
        return headers;
      },
      rewriteHeaders: (headers) => {
        // The API server answered after the client left: reply-from then destroys the answer and calls neither
        // callback. The call ends here, or the breaker (its half-open trial) and a write's drain would wait forever.
        if (reply.raw.destroyed) resolve();
        return headers;
      },
      onResponse: (_req, _reply, res) => {
        resolve();
        plan.onResponse(reply, { statusCode: res.statusCode, stream: res.stream });
      },
      // A client whose request stopped before its end (its body streams through) failed it, not the API server.
      onError: (_reply, { error }) => reject(request.raw.complete ? error : new ClientRequestError({ cause: error })),
    });
  });
}

/** A watch as an HTTP/2 stream: the same request reply-from would send, the answer handed over as reply-from does. */
async function forwardStream(request: FastifyRequest, reply: FastifyReply, plan: ForwardPlan, watches: Http2WatchPool): Promise<void> {
  const { upstream } = plan.entry;
  const headers: Record<string, string | string[] | undefined> = { ...request.headers };
  upstreamHeaders(headers, plan);
  // No body is sent: a length the client announced (and fastify did not read) would not be true.
  delete headers['content-length'];
  headers[':method'] = request.method;
  headers[':path'] = `${upstream.upstreamPath(plan.path)}${plan.query === '' ? '' : `?${plan.query}`}`;
  const answer = await watches.request(headers);
  const { statusCode } = answer;
  // The client left while the API server answered; or a status that HTTP/1.1 cannot carry on.
  if (reply.raw.destroyed || statusCode < 200 || statusCode > 599) {
    answer.stream.close(constants.NGHTTP2_CANCEL);
    if (reply.raw.destroyed) return;
    throw new CtrlmeshError(ErrorCodes.PROXY_REQUEST, `the API server answered with status ${statusCode}`);
  }
  for (const [name, value] of Object.entries(answer.headers)) {
    if (name.charCodeAt(0) !== 58 && value !== undefined) reply.header(name, value);
  }
  reply.code(statusCode);
  plan.onResponse(reply, { statusCode, stream: answer.stream });
}

/** Sends a lock's response with its name restored. */
export async function sendRestored(reply: FastifyReply, res: UpstreamResponse, renamer: LockRenamer, maxBytes: number): Promise<void> {
  const body = renamer.restoreBody(await readBoundedBody(res.stream, maxBytes));
  reply.removeHeader('content-length');
  await reply.send(body);
}
