import type {} from '@fastify/reply-from';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { validateHeaderName, validateHeaderValue, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { constants } from 'node:http2';
import type { Readable } from 'node:stream';
import type { Logger } from 'pino';
import type { LockRenamer } from '../../routes/leader-election.js';
import type { ClusterEntry } from '../../routes/route-state.js';
import type { Http2WatchPool } from '../../upstream/index.js';
import { ClientRequestError, CtrlmeshError, ErrorCodes, UpstreamTimeoutError } from '../../../errors.js';
import { readBoundedBytes, stripHeaders, type HeaderPolicy } from '../parse/index.js';
import { statusBody, statusFor, type KubeStatus } from '../judgement/status.js';

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
  body: string | Buffer | undefined;
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
function upstreamHeaders(headers: Record<string, string | string[] | undefined>, plan: Pick<ForwardPlan, 'entry' | 'accept' | 'encoding' | 'headers'>): void {
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
  const answer = await openWatchStream(watches, request.raw, plan, () => reply.raw.destroyed);
  if (answer === undefined) return;
  for (const [name, value] of Object.entries(answer.headers)) reply.header(name, value);
  reply.code(answer.statusCode);
  plan.onResponse(reply, answer);
}

/** An HTTP/2 answer to pass on over HTTP/1.1: its status, its headers but the pseudo-headers, its body. */
export interface StreamAnswer extends UpstreamResponse {
  headers: OutgoingHttpHeaders;
}

/**
 * Sends a watch without a body as a stream of the cluster's HTTP/2 connections; resolves with the answer's head, or
 * undefined when the client left meanwhile (the stream is cancelled). A status HTTP/1.1 cannot carry fails it.
 */
export async function openWatchStream(
  watches: Http2WatchPool,
  request: IncomingMessage,
  plan: Pick<ForwardPlan, 'entry' | 'path' | 'query' | 'accept' | 'encoding' | 'headers'>,
  clientGone: () => boolean,
): Promise<StreamAnswer | undefined> {
  const { upstream } = plan.entry;
  const headers: Record<string, string | string[] | undefined> = { ...request.headers };
  upstreamHeaders(headers, plan);
  // No body is sent: a length the client announced (and no one read) would not be true.
  delete headers['content-length'];
  headers[':method'] = request.method;
  headers[':path'] = `${upstream.upstreamPath(plan.path)}${plan.query === '' ? '' : `?${plan.query}`}`;
  const answer = await watches.request(headers);
  const { statusCode } = answer;
  // The client left while the API server answered; or a status that HTTP/1.1 cannot carry on.
  if (clientGone() || statusCode < 200 || statusCode > 599) {
    answer.stream.close(constants.NGHTTP2_CANCEL);
    if (clientGone()) return undefined;
    throw new CtrlmeshError(ErrorCodes.PROXY_REQUEST, `the API server answered with status ${statusCode}`);
  }
  const passed: OutgoingHttpHeaders = {};
  for (const name in answer.headers) {
    const value = answer.headers[name];
    if (name.charCodeAt(0) === 58 || value === undefined) continue;
    try {
      // Checked before the client's response is touched: Node's HTTP/1.1 writer would throw on it mid-answer.
      validateHeaderName(name);
      for (const one of Array.isArray(value) ? value : [value]) validateHeaderValue(name, one);
    } catch {
      answer.stream.close(constants.NGHTTP2_CANCEL);
      throw new CtrlmeshError(ErrorCodes.PROXY_REQUEST, `the API server answered with a header HTTP/1.1 cannot carry (${JSON.stringify(name.slice(0, 64))})`);
    }
    passed[name] = value;
  }
  return { statusCode, headers: passed, stream: answer.stream };
}

/** The Status that answers a request its cluster could not be reached for (the breaker's refusal among them). */
export function failureAnswer(err: unknown, cluster: string, breakerRetryAfterSeconds: number, logger: Logger): { status: KubeStatus; retryAfterSeconds?: number } {
  // Whatever was thrown (a library may reject with no Error at all) gets its answer.
  const code = err instanceof Error ? (err as { code?: unknown }).code : undefined;
  if (err instanceof ClientRequestError) return { status: statusFor(400, err.message) };
  if (code === 'EOPENBREAKER') {
    return { status: statusBody(503, 'ServiceUnavailable', `cluster "${cluster}" is failing: its circuit breaker is open`), retryAfterSeconds: breakerRetryAfterSeconds };
  }
  logger.warn({ err, cluster }, 'API server unreachable');
  const timeout = err instanceof UpstreamTimeoutError || code === 'UND_ERR_HEADERS_TIMEOUT' || (err instanceof Error && err.name === 'GatewayTimeoutError');
  const message = `cluster "${cluster}" API server unreachable: ${err instanceof Error ? err.message : String(err)}`;
  return timeout ? { status: statusBody(504, 'InternalError', message) } : { status: statusBody(503, 'ServiceUnavailable', message), retryAfterSeconds: 1 };
}

/** Sends a lock's response with its name restored. */
export async function sendRestored(reply: FastifyReply, res: UpstreamResponse, renamer: LockRenamer, maxBytes: number): Promise<void> {
  const body = renamer.restoreBody(await readBoundedBytes(res.stream, maxBytes));
  reply.removeHeader('content-length');
  await reply.send(body);
}
