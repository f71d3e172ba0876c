import type { FastifyReply } from 'fastify';
import { pipeline, Readable } from 'node:stream';
import { createGunzip, gunzipSync } from 'node:zlib';
import type { UpstreamResponse } from './forward.js';
import { collectUpTo } from '../parse/index.js';
import { statusFor } from '../judgement/status.js';
import { sendStatus } from './send-status.js';

/** A compressed answer up to this size is read whole and decoded in one call (a list of 5,000 ConfigMaps: 264 KiB). */
const WHOLE_COMPRESSED_BYTES = 1024 * 1024;
/** The most one call decodes (about 12 ms of the event loop); an answer that decodes to more is streamed. */
const WHOLE_DECODED_BYTES = 8 * 1024 * 1024;
/** zlib's output chunks when an answer is too long to decode whole: its default of 16 KiB costs a job and a write each. */
const STREAMED_CHUNK_BYTES = 64 * 1024;

/**
 * Whether a client's Accept-Encoding takes gzip at a quality above 0: named (`gzip`, `x-gzip`), or else through `*`,
 * which a named gzip overrides (`gzip;q=0, *` refuses it).
 */
export function acceptsGzip(header: string | string[] | undefined): boolean {
  if (header === undefined) return false;
  let named: boolean | undefined;
  let any = false;
  for (const part of (Array.isArray(header) ? header.join(',') : header).split(',')) {
    const [coding = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    const taken = q === undefined || Number(q.slice(2)) > 0;
    if (coding === 'gzip' || coding === 'x-gzip') named = (named ?? false) || taken;
    else if (coding === '*') any = taken;
  }
  return named ?? any;
}

/**
 * Sends an answer that ends by itself, asked for as gzip on behalf of a client that takes no encoding, decoded: whole
 * with its length when it is short enough, else streamed. The API server compresses only answers over 128 KiB, so this
 * is a long list, which then costs the proxy 13 times fewer TLS records to read (each a callback and a chunk through
 * the body stream) than unencoded; Go's transport does the same for `kubectl proxy`. Decoded in one call, not through
 * zlib's stream: in a proxy that had served a storm of watches the stream cost more than reading the list unencoded
 * (bench/results/history.md). Bytes that are not gzip get 502 (nothing was sent yet); an answer the API
 * server's connection cuts is cut for the client too.
 */
export function sendGunzipped(reply: FastifyReply, res: UpstreamResponse): void {
  const { stream } = res;
  reply.removeHeader('content-encoding');
  reply.removeHeader('content-length');
  collectUpTo(stream, WHOLE_COMPRESSED_BYTES, {
    whole: (chunks, size) => {
      const compressed = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
      let body: Buffer;
      try {
        body = gunzipSync(compressed, { maxOutputLength: WHOLE_DECODED_BYTES });
      } catch (err) {
        // Over the output limit: RangeError (ERR_BUFFER_TOO_LARGE); anything else is not gzip.
        if (err instanceof RangeError) return void reply.send(decoded(Readable.from([compressed])));
        reply.removeHeader('transfer-encoding');
        return void sendStatus(reply, statusFor(502, `the API server's gzip answer could not be decoded: ${(err as Error).message}`));
      }
      reply.removeHeader('transfer-encoding');
      reply.send(body);
    },
    over: (chunks, size) => {
      stream.unshift(Buffer.concat(chunks, size));
      reply.send(decoded(stream));
    },
    failed: (err) => reply.raw.destroy(err),
  });
}

/** A compressed stream decoded as it comes; a failure (a cut connection, bytes that are not gzip) ends it with it. */
function decoded(compressed: Readable): Readable {
  return pipeline(compressed, createGunzip({ chunkSize: STREAMED_CHUNK_BYTES }), () => undefined);
}
