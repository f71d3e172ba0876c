import type { KV, KvEntry } from '@nats-io/kv';
import type { Logger } from 'pino';
import { isStreamNotFound } from './bucket-keeper.js';
import type { NatsLink } from './connection.js';
import { reopenUntilStopped, type Watch } from './reopened.js';

export interface WatchKvOptions {
  link: NatsLink;
  /** Opens the bucket; retried until it succeeds (the bucket may not exist yet). */
  open: () => Promise<KV>;
  /** Key or wildcard key. */
  key: string | string[];
  logger: Logger;
  /**
   * Called for every put and delete, in revision order, never twice for one revision of one stream. When the
   * bucket is deleted and created again, revisions start over: the watch then reads it again from the start.
   */
  onEntry: (entry: KvEntry) => void;
  /** Called each time the watch has delivered the current values (after start and after each resume). */
  onCurrent?: () => void;
  retryMs?: number;
  /**
   * A watch that delivered nothing for this long looks at its stream (one stream-info request): deleted or
   * created again, it is opened again (JetStream's own watch would silently skip the new stream's first
   * revisions, up to the last one seen). Default 5 s.
   */
  streamCheckMs?: number;
}

const EMPTY_WATCH_MS = 200;
const STREAM_CHECK_MS = 5_000;

/**
 * Watches KV keys and survives NATS trouble: when the watch ends, fails, or the connection comes back after a
 * disconnection, it is opened again from the revision after the last one seen, so nothing is missed or repeated.
 */
export function watchKv(options: WatchKvOptions): Watch {
  const { logger } = options;
  let lastRevision = 0;
  /** When the watched stream was created (server time), as seen at the last opening. */
  let streamCreated: string | undefined;

  return reopenUntilStopped({
    link: options.link,
    retryMs: options.retryMs ?? 1_000,
    onError: (err) => logger.warn({ err, key: options.key }, 'KV watch failed; retrying'),
    follow: async (opening) => {
      const kv = await options.open();
      const created = (await kv.status()).streamInfo.created;
      if (streamCreated !== undefined && created !== streamCreated) {
        logger.warn({ key: options.key }, 'the KV bucket was created again; reading it from the start');
        lastRevision = 0;
      }
      streamCreated = created;
      const iter = await kv.watch({
        key: options.key,
        ...(lastRevision > 0 ? { resumeFromRevision: lastRevision + 1 } : {}),
      });
      opening.onEnd(() => iter.stop());
      if (opening.overtaken) iter.stop();
      let announced = false;
      const announce = (): void => {
        if (!announced) {
          announced = true;
          options.onCurrent?.();
        }
      };
      // An empty watch delivers nothing, so silence for a moment also means "current"; otherwise the entry
      // whose delta (messages left) is 0 is the last of the initial values.
      const quiet = setTimeout(announce, EMPTY_WATCH_MS);
      let delivered = false;
      const streamCheck = setInterval(() => {
        if (delivered) {
          delivered = false;
          return;
        }
        kv.status().then(
          (status) => {
            if (status.streamInfo.created !== created && !opening.overtaken) opening.restart();
          },
          (err: unknown) => {
            if (isStreamNotFound(err) && !opening.overtaken) opening.restart();
          },
        );
      }, options.streamCheckMs ?? STREAM_CHECK_MS);
      streamCheck.unref();
      try {
        for await (const entry of iter) {
          delivered = true;
          clearTimeout(quiet);
          if (entry.revision <= lastRevision) continue;
          lastRevision = entry.revision;
          try {
            options.onEntry(entry);
          } catch (err) {
            logger.error({ err, key: entry.key }, 'a KV watch handler failed');
          }
          if (!entry.delta) announce();
        }
      } finally {
        clearInterval(streamCheck);
      }
    },
  });
}
