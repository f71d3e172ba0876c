import type { Readable } from 'node:stream';
import { BodyTooLargeError } from '../../../errors.js';

/** The API server's own limit for a request body (3 MiB): a bigger one it would refuse anyway. */
export const DEFAULT_MAX_BODY_BYTES = 3 * 1024 * 1024;

/**
 * Reads a whole body, but never more than `limit` bytes: a declared Content-Length over it fails before any byte
 * is read, a longer stream as soon as it passes it. The rest is left unread (not destroyed), so the 413 still
 * reaches the client; the caller closes the connection after it.
 */
export function readBoundedBody(stream: Readable, limit: number, declaredLength?: string): Promise<string> {
  if (declaredLength !== undefined && Number(declaredLength) > limit) return Promise.reject(new BodyTooLargeError(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (): void => {
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('error', onError);
    };
    const onData = (chunk: Buffer | string): void => {
      const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      size += buffer.length;
      if (size > limit) {
        done();
        stream.pause();
        reject(new BodyTooLargeError(limit));
        return;
      }
      chunks.push(buffer);
    };
    const onEnd = (): void => {
      done();
      resolve(Buffer.concat(chunks).toString('utf8'));
    };
    const onError = (err: Error): void => {
      done();
      reject(err);
    };
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
  });
}
