import type {} from '@fastify/reply-from';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import type { LockRenamer } from '../routes/leader-election.js';
import type { ClusterEntry } from '../routes/route-state.js';
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
  /** Asks for an unencoded answer: the proxy reads this one. */
  identity?: boolean;
  /** A watch: sent on the cluster's watch connections (HTTP/2 streams where the API server offers them). */
  watch: boolean;
  headers: HeaderPolicy;
  /** Called once the API server's response head arrived; it sends the reply. */
  onResponse(reply: FastifyReply, res: UpstreamResponse): void;
}

/** Retries are the breaker's business; reply-from would otherwise retry GETs on 503. */
const noRetry = (): null => null;

/** Sends one request to a cluster through reply-from; resolves on an answer, rejects when unreachable. */
export function forward(request: FastifyRequest, reply: FastifyReply, plan: ForwardPlan): Promise<void> {
  const { upstream } = plan.entry;
  return new Promise((resolve, reject) => {
    reply.from(`${plan.watch ? upstream.watchBase : upstream.virtualBase}${upstream.upstreamPath(plan.path)}`, {
      queryString: () => plan.query,
      ...(plan.body === undefined ? {} : { body: plan.body, contentType: plan.contentType ?? request.headers['content-type'] ?? 'application/json' }),
      retryDelay: noRetry,
      rewriteRequestHeaders: (_req, headers) => {
        stripHeaders(headers, plan.headers);
        headers.host = upstream.server.host;
        // The operator never authenticates to the proxy; the proxy presents its own credentials per cluster.
        if (upstream.authorization !== undefined) headers.authorization = upstream.authorization;
        if (plan.accept !== undefined) headers.accept = plan.accept;
        if (plan.identity === true) delete headers['accept-encoding'];
        return headers;
      },
      onResponse: (_req, _reply, res) => {
        resolve();
        plan.onResponse(reply, { statusCode: res.statusCode, stream: res.stream });
      },
      onError: (_reply, { error }) => reject(error),
    });
  });
}

/** Sends a lock's response with its name restored. */
export async function sendRestored(reply: FastifyReply, res: UpstreamResponse, renamer: LockRenamer, maxBytes: number): Promise<void> {
  const body = renamer.restoreBody(await readBoundedBody(res.stream, maxBytes));
  reply.removeHeader('content-length');
  await reply.send(body);
}
