import type { KV } from '@nats-io/kv';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { Logger } from 'pino';
import { createBuckets, type ControlBuckets, type CreateBucketsOptions } from './buckets.js';
import { Buckets, type BucketName } from './names.js';

/** Whether a JetStream call failed because the stream it names does not exist (by the API's error code). */
export function isStreamNotFound(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamNotFound;
}

/** Whether a compare-and-set write was refused because the key is not at the expected revision (by code). */
export function isWrongRevision(err: unknown): boolean {
  return (
    err instanceof JetStreamApiError &&
    (err.code === JetStreamApiCodes.StreamWrongLastSequence || err.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}

/** The control buckets, and a way to bring back those deleted under a running hub. */
export interface KeptBuckets extends ControlBuckets {
  /**
   * Looks at every bucket's stream (one stream-info request each, in parallel) and creates again those deleted.
   * Concurrent calls share one check. Fails when NATS cannot answer (then nothing can be told, nothing is created).
   */
  ensure(): Promise<void>;
  /**
   * `ensure`, then the buckets whose stream is new since the previous `restore`: created again now, by `ensure`
   * meanwhile, or by another process (a restarted hub, an operator). Revisions known in those are void: the caller
   * forgets them and writes again. The handles above stay valid (a KV handle names its stream; it does not hold
   * it). One caller only (the reconciler): each new stream is reported once.
   */
  restore(): Promise<BucketName[]>;
}

/** Creates (or opens) the control buckets like `createBuckets`, able to re-create them when deleted. */
export async function createKeptBuckets(options: CreateBucketsOptions & { logger: Logger }): Promise<KeptBuckets> {
  const { logger, ...createOptions } = options;
  const buckets = await createBuckets(createOptions);
  const handles: [BucketName, KV][] = [
    [Buckets.clusters, buckets.clusters],
    [Buckets.state, buckets.state],
    [Buckets.routes, buckets.routes],
    [Buckets.hub, buckets.hub],
  ];
  /** When each bucket's stream was created (ISO time from the server), as `restore` last reported it. */
  const created = new Map<BucketName, string | undefined>();
  const look = (): Promise<[BucketName, string | undefined][]> =>
    Promise.all(
      handles.map(async ([name, kv]): Promise<[BucketName, string | undefined]> => {
        try {
          return [name, (await kv.status()).streamInfo.created];
        } catch (err) {
          if (isStreamNotFound(err)) return [name, undefined];
          throw err;
        }
      }),
    );
  for (const [name, at] of await look()) created.set(name, at);

  const check = async (): Promise<[BucketName, string | undefined][]> => {
    const seen = await look();
    const missing = seen.filter(([, at]) => at === undefined).map(([name]) => name);
    if (missing.length === 0) return seen;
    logger.warn({ buckets: missing }, 'KV buckets were deleted; creating them again');
    await createBuckets(createOptions);
    return look();
  };
  let running: Promise<[BucketName, string | undefined][]> | undefined;
  const shared = (): Promise<[BucketName, string | undefined][]> => {
    running ??= check().finally(() => {
      running = undefined;
    });
    return running;
  };
  return {
    ...buckets,
    async ensure() {
      await shared();
    },
    async restore() {
      const fresh: BucketName[] = [];
      for (const [name, at] of await shared()) {
        if (at !== created.get(name)) fresh.push(name);
        created.set(name, at);
      }
      return fresh;
    },
  };
}
