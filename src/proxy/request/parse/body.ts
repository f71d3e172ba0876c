import type { Readable } from 'node:stream';
import { BodyTooLargeError } from '../../../errors.js';

/** The API server's own limit for a request body (3 MiB): a bigger one it would refuse anyway. */
export const DEFAULT_MAX_BODY_BYTES = 3 * 1024 * 1024;

/**
 * Reads a whole body, but never more than `limit` bytes: a declared Content-Length over it fails before any byte
 * is read, a longer stream as soon as it passes it. The rest is left unread (not destroyed), so the 413 still
 * reaches the client; the caller closes the connection after it.
 */
export async function readBoundedBody(stream: Readable, limit: number, declaredLength?: string): Promise<string> {
  return (await readBoundedBytes(stream, limit, declaredLength)).toString('utf8');
}

/** {@link readBoundedBody} as bytes: for a body that is not text (protobuf). */
export function readBoundedBytes(stream: Readable, limit: number, declaredLength?: string): Promise<Buffer> {
  if (declaredLength !== undefined && Number(declaredLength) > limit) return Promise.reject(new BodyTooLargeError(limit));
  return new Promise((resolve, reject) => {
    collectUpTo(stream, limit, {
      whole: (chunks) => resolve(Buffer.concat(chunks)),
      over: () => reject(new BodyTooLargeError(limit)),
      failed: reject,
    });
  });
}

/** What collectUpTo tells, once: the stream ended, passed the limit, or failed. */
export interface CollectHandlers {
  /** Ended within the limit: everything it gave. */
  whole(chunks: Buffer[], size: number): void;
  /** Passed the limit: what it gave so far, the chunk that passed it included; the stream is paused, the rest unread. */
  over(chunks: Buffer[], size: number): void;
  failed(err: Error): void;
}

/** Reads a stream into memory until it ends or passes `limit` bytes, whichever comes first, then lets go of it. */
export function collectUpTo(stream: Readable, limit: number, handlers: CollectHandlers): void {
  const chunks: Buffer[] = [];
  let size = 0;
  const done = (): void => {
    stream.off('data', onData);
    stream.off('end', onEnd);
    stream.off('error', onError);
  };
  const onData = (chunk: Buffer | string): void => {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    chunks.push(buffer);
    size += buffer.length;
    if (size <= limit) return;
    done();
    stream.pause();
    handlers.over(chunks, size);
  };
  const onEnd = (): void => {
    done();
    handlers.whole(chunks, size);
  };
  const onError = (err: Error): void => {
    done();
    handlers.failed(err);
  };
  stream.on('data', onData);
  stream.on('end', onEnd);
  stream.on('error', onError);
}
