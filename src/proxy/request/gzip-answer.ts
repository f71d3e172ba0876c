import type { FastifyReply } from 'fastify';
import { pipeline } from 'node:stream';
import { createGunzip } from 'node:zlib';
import type { UpstreamResponse } from './forward.js';
import { batchByTurn } from './turn-batches.js';

/**
 * zlib's output chunk. zlib's default of 16 KiB made decoding cost more than reading a list unencoded (a job on
 * libuv's pool and a write to the client each); 256 KiB cost more than 64 KiB in garbage collections (bench, one run).
 */
const DECODED_CHUNK_BYTES = 64 * 1024;

/** Whether a client's Accept-Encoding takes gzip (or anything, `*`) at a quality above 0. */
export function acceptsGzip(header: string | string[] | undefined): boolean {
  if (header === undefined) return false;
  for (const part of (Array.isArray(header) ? header.join(',') : header).split(',')) {
    const [coding = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    if (coding !== 'gzip' && coding !== 'x-gzip' && coding !== '*') continue;
    const q = params.find((p) => p.startsWith('q='));
    if (q === undefined || Number(q.slice(2)) > 0) return true;
  }
  return false;
}

/**
 * An answer that ends by itself, asked for as gzip on behalf of a client that takes no encoding, as that client
 * takes it: decoded, its encoding and length headers gone. The API server compresses only answers over 128 KiB, so
 * this is a long list: 13 times fewer bytes to read from its TLS connection than unencoded, where each record read
 * costs the proxy a callback, and decoding costs less than those callbacks (docs/proxy.md, Figures); Go's transport
 * does the same for `kubectl proxy`. The compressed records of one turn are one job for zlib.
 */
export function gunzipped(reply: FastifyReply, res: UpstreamResponse): UpstreamResponse {
  reply.removeHeader('content-encoding');
  reply.removeHeader('content-length');
  // A failure (the API server's connection, or bytes that are not gzip) ends the decoded stream with it, which cuts
  // the client's answer as an upstream failure would.
  const stream = pipeline(batchByTurn(res.stream), createGunzip({ chunkSize: DECODED_CHUNK_BYTES }), () => undefined);
  return { statusCode: res.statusCode, stream };
}
