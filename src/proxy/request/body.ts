import type { Readable } from 'node:stream';
import { CtrlmeshError, ErrorCodes } from '../../errors.js';

/** The API server's own limit for a request body (3 MiB): a bigger one it would refuse anyway. */
export const DEFAULT_MAX_BODY_BYTES = 3 * 1024 * 1024;

/** A body the proxy had to read was larger than it reads: answered 413, the rest never read. */
export class BodyTooLargeError extends CtrlmeshError {
  constructor(readonly limit: number) {
    super(ErrorCodes.PROXY_REQUEST, `the request body is larger than ${limit} bytes, the most the proxy reads to judge a request`);
    this.name = 'BodyTooLargeError';
  }
}

/**
 * Reads a whole body, but never more than `limit` bytes: a declared Content-Length over it fails before any byte
 * is read, a longer stream fails as soon as it passes it (and is destroyed).
 */
export async function readBoundedBody(stream: Readable, limit: number, declaredLength?: string): Promise<string> {
  if (declaredLength !== undefined && Number(declaredLength) > limit) {
    stream.destroy();
    throw new BodyTooLargeError(limit);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
    size += buffer.length;
    if (size > limit) {
      stream.destroy();
      throw new BodyTooLargeError(limit);
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}
