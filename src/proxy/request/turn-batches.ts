import { finished, Readable } from 'node:stream';

/** Bytes held for one batch at the most: past it the source waits until the batch is passed on. */
const MAX_BATCH_BYTES = 1024 * 1024;

/**
 * A stream's bytes, passed on once per turn of the event loop instead of once per chunk: Node hands the proxy each
 * TLS record of the API server (often less than 4 KiB) in a callback of its own, and what reads them (zlib: a job
 * on libuv's pool per chunk) pays per chunk. The chunks that arrive in one turn are joined and passed on after it
 * (setImmediate). Only for answers that end by themselves: a watch's events must not wait.
 */
export function batchByTurn(source: Readable): Readable {
  let pending: Buffer[] = [];
  let bytes = 0;
  let scheduled = false;
  let ended = false;
  let wanted = true;

  const flush = (): void => {
    scheduled = false;
    if (out.destroyed) return;
    if (bytes > 0) {
      const batch = pending.length === 1 ? pending[0]! : Buffer.concat(pending, bytes);
      pending = [];
      bytes = 0;
      wanted = out.push(batch);
    }
    if (ended) out.push(null);
    else if (wanted) source.resume();
    else source.pause();
  };
  const schedule = (): void => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(flush);
  };

  const out = new Readable({
    read() {
      wanted = true;
      if (bytes > 0 || ended) schedule();
      else source.resume();
    },
    destroy(err, callback) {
      source.off('data', onData);
      source.destroy();
      callback(err);
    },
  });
  const onData = (chunk: Buffer): void => {
    pending.push(chunk);
    bytes += chunk.length;
    if (bytes >= MAX_BATCH_BYTES) source.pause();
    schedule();
  };
  source.on('data', onData);
  source.once('end', () => {
    ended = true;
    schedule();
  });
  // An error, or a close before the end (a connection cut without one), ends the batches with it.
  finished(source, (err) => {
    if (err) out.destroy(err);
  });
  return out;
}
