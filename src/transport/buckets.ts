import { Kvm, type KV } from '@nats-io/kv';
import type { JetStreamClient } from '@nats-io/jetstream';
import { CtrlmeshError, ErrorCodes } from '../errors.js';
import { Buckets, type BucketName } from './names.js';

export interface ControlBuckets {
  clusters: KV;
  state: KV;
  routes: KV;
  hub: KV;
}

export interface CreateBucketsOptions {
  js: JetStreamClient;
  /** 1 on a single NATS server, 3 on a NATS cluster (stream replicas). */
  replicas: number;
  /**
   * TTL of the hub leader lease. It is the `ctrlmesh-hub` bucket's max age, fixed when the bucket is first
   * created: changing it later needs the bucket deleted (`nats kv del ctrlmesh-hub`).
   */
  leaseTtlMs: number;
}

/** Creates the control-plane buckets (or opens them if they exist): idempotent, safe for every hub to call. */
export async function createBuckets(options: CreateBucketsOptions): Promise<ControlBuckets> {
  const kvm = new Kvm(options.js);
  const make = async (bucket: BucketName, extra: { history?: number; ttl?: number } = {}): Promise<KV> => {
    try {
      return await kvm.create(bucket, { replicas: options.replicas, history: extra.history ?? 1, ttl: extra.ttl ?? 0 });
    } catch (err) {
      throw new CtrlmeshError(
        ErrorCodes.NATS,
        `cannot create KV bucket ${bucket} with ${options.replicas} replica(s): ${(err as Error).message}` +
          ' (is JetStream enabled, and are there that many servers?)',
        { cause: err },
      );
    }
  };
  return {
    clusters: await make(Buckets.clusters),
    state: await make(Buckets.state),
    // A few revisions of each route table are kept so an operator can see what changed.
    routes: await make(Buckets.routes, { history: 5 }),
    hub: await make(Buckets.hub, { ttl: options.leaseTtlMs }),
  };
}

/** Opens one existing bucket without creating it; fails if the hub has not created it yet. */
export async function openBucket(js: JetStreamClient, bucket: BucketName): Promise<KV> {
  const kv = await new Kvm(js).open(bucket);
  // open() is lazy: status() makes it fail now when the bucket is missing.
  await kv.status();
  return kv;
}
