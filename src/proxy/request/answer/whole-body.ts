import type { FastifyReply } from 'fastify';
import type { UpstreamResponse } from './forward.js';
import { collectUpTo } from '../parse/index.js';

/**
 * Answers that end within this many bytes are read whole and sent with their head: one write to the client, where
 * streaming costs a write for the head, one for every chunk the API server sent (about 4 KiB each) and one for the
 * last chunk. 16 answers in flight hold 4 MiB at most.
 */
export const WHOLE_BODY_BYTES = 256 * 1024;

/**
 * Sends an answer that ends by itself (an object, a list): whole with its length when it ends within `limit` bytes,
 * else streamed on, the bytes read so far put back at its head. Not for watches, followed logs or proxied
 * connections: their bytes must not wait for more.
 */
export function sendWhole(reply: FastifyReply, res: UpstreamResponse, limit = WHOLE_BODY_BYTES): void {
  const { stream } = res;
  collectUpTo(stream, limit, {
    whole: (chunks, size) => {
      // The API server's framing (chunked) does not apply to a body sent whole: the reply gets its length instead.
      reply.removeHeader('transfer-encoding');
      reply.removeHeader('content-length');
      reply.send(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    },
    over: (chunks, size) => {
      stream.unshift(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
      reply.send(stream);
    },
    // The API server's connection failed mid-answer: the client's is cut too, as it would be with the answer streaming.
    failed: (err) => reply.raw.destroy(err),
  });
}
