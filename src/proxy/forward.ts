import type {} from '@fastify/reply-from';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Readable } from 'node:stream';
import type { LockRenamer } from './leader-election.js';
import type { ClusterEntry } from './route-state.js';

/** The upstream answer reply-from hands over. */
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

/** Sends one request to a cluster through reply-from; resolves on an answer, rejects when unreachable. */
export function forward(request: FastifyRequest, reply: FastifyReply, plan: ForwardPlan): Promise<void> {
  const { upstream } = plan.entry;
  return new Promise((resolve, reject) => {
    reply.from(`${upstream.virtualBase}${upstream.upstreamPath(plan.path)}`, {
      queryString: () => plan.query,
      ...(plan.body === undefined ? {} : { body: plan.body, contentType: request.headers['content-type'] ?? 'application/json' }),
      // Retries are the breaker's business; reply-from would otherwise retry GETs on 503.
      retryDelay: () => null,
      rewriteRequestHeaders: (_req, headers) => {
        headers.host = upstream.server.host;
        // The operator never authenticates to the proxy; the proxy presents its own credentials per cluster.
        delete headers.authorization;
        if (upstream.authorization !== undefined) headers.authorization = upstream.authorization;
        if (plan.json) headers.accept = 'application/json';
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
