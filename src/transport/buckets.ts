import { setTimeout as sleep } from 'node:timers/promises';
import { Kvm, type KV } from '@nats-io/kv';
import { JetStreamApiCodes, JetStreamApiError, type JetStreamClient } from '@nats-io/jetstream';
import { TimeoutError } from '@nats-io/transport-node';
import { CtrlmeshError, ErrorCodes } from '../errors.js';
import { Buckets, type BucketName } from './names.js';

export interface ControlBuckets {
  clusters: KV;
  state: KV;
  routes: KV;
  hub: KV;
  /** The fewest stream replicas among the four buckets, as they are (whoever created them). */
  replicas: number;
}

/** A bucket count, or `auto`: the most the NATS cluster can place now, up to 3. */
export type BucketReplicas = number | 'auto';

export interface CreateBucketsOptions {
  js: JetStreamClient;
  /**
   * Stream replicas of buckets created now (existing buckets keep theirs): 1 on a single NATS server, 3 on a
   * cluster. `auto` tries 3, then 2, then 1, taking the first JetStream can place: 3 on a cluster of three or
   * more, 1 on a single server. A count a cluster cannot place is asked for again for 10 s before fewer are taken,
   * so a cluster with servers down (not merely slow) when the buckets are first created gets fewer.
   */
  replicas: BucketReplicas;
  /**
   * TTL of the hub leader lease. It is the `ctrlmesh-hub` bucket's max age, fixed when the bucket is first
   * created: changing it later needs the bucket deleted (`nats kv del ctrlmesh-hub`).
   */
  leaseTtlMs: number;
}

/** How many JetStream API timeouts a bucket create survives. */
const CREATE_TIMEOUT_RETRIES = 6;

/** The most replicas `auto` asks for: a majority survives one server lost. */
const AUTO_MAX_REPLICAS = 3;

/**
 * How long `auto` keeps asking for a count JetStream cannot place before it settles for fewer: a cluster whose
 * servers have just started (or are slow, on a loaded machine) may not count every peer yet, and a bucket created
 * with too few replicas keeps them for good.
 */
const PLACEMENT_GRACE_MS = 10_000;
const PLACEMENT_RETRY_MS = 500;

/** nats-server's JetStream error codes meaning "not that many replicas here". */
const JS_NOT_CLUSTERED = 10074; // replicas > 1 not supported in non-clustered mode
const JS_NO_PLACEMENT = new Set([10005, 10023]); // no suitable peers for placement; insufficient resources

/** After a create at `replicas` failed with `err`: the count to try next under `auto`, or undefined to give up. */
function fewerReplicas(err: unknown, replicas: number): number | undefined {
  if (!(err instanceof JetStreamApiError) || replicas <= 1) return undefined;
  if (err.code === JS_NOT_CLUSTERED) return 1;
  return JS_NO_PLACEMENT.has(err.code) ? replicas - 1 : undefined;
}

/** Whether `auto` should ask for the same count again rather than settle for fewer (a clustered placement failure, in the grace time). */
function placementMayCome(err: unknown, since: number): boolean {
  return err instanceof JetStreamApiError && JS_NO_PLACEMENT.has(err.code) && Date.now() - since < PLACEMENT_GRACE_MS;
}

/**
 * Whether JetStream answered that it is not enabled for the account (nats.js wraps that answer in an error of its
 * own, the API's error as its cause). A cluster that has just formed answers so for a moment, until the server that
 * takes the request has the account's JetStream set up: the bench's hubs met it about one start in two.
 */
export function isJetStreamNotEnabled(err: unknown): boolean {
  const api = err instanceof Error && !(err instanceof JetStreamApiError) ? err.cause : err;
  return api instanceof JetStreamApiError && api.code === JetStreamApiCodes.JetStreamNotEnabledForAccount;
}

/** Creates the control-plane buckets (or opens them if they exist): idempotent, safe for every hub to call. */
export async function createBuckets(options: CreateBucketsOptions): Promise<ControlBuckets> {
  const kvm = new Kvm(options.js);
  // Under `auto`, the count the first created bucket settled on is where the next one starts.
  let next = options.replicas === 'auto' ? AUTO_MAX_REPLICAS : options.replicas;
  const make = async (bucket: BucketName, extra: { history?: number; ttl?: number } = {}): Promise<KV> => {
    const since = Date.now();
    for (let timeouts = 0; ; ) {
      const replicas = next;
      try {
        // An existing bucket is opened as it is: its replicas are not changed.
        return await kvm.create(bucket, { replicas, history: extra.history ?? 1, ttl: extra.ttl ?? 0 });
      } catch (err) {
        const fewer = options.replicas === 'auto' ? fewerReplicas(err, replicas) : undefined;
        if (fewer !== undefined && placementMayCome(err, since)) {
          await sleep(PLACEMENT_RETRY_MS);
          continue;
        }
        if (fewer !== undefined) {
          next = fewer;
          continue;
        }
        if (isJetStreamNotEnabled(err) && Date.now() - since < PLACEMENT_GRACE_MS) {
          await sleep(PLACEMENT_RETRY_MS);
          continue;
        }
        // A cluster that has just formed (or lost its meta leader) may take longer than one API timeout to place a
        // replicated stream: the create is idempotent, so it is asked again a few times.
        if (err instanceof TimeoutError && ++timeouts < CREATE_TIMEOUT_RETRIES) continue;
        throw new CtrlmeshError(
          ErrorCodes.NATS,
          `cannot create KV bucket ${bucket} with ${replicas} replica(s): ${(err as Error).message}` +
            ' (is JetStream enabled, and are there that many servers?)',
          { cause: err },
        );
      }
    }
  };
  const clusters = await make(Buckets.clusters);
  const state = await make(Buckets.state);
  // A few revisions of each route table are kept so an operator can see what changed.
  const routes = await make(Buckets.routes, { history: 5 });
  const hub = await make(Buckets.hub, { ttl: options.leaseTtlMs });
  const replicas = Math.min(...(await Promise.all([clusters, state, routes, hub].map(async (kv) => (await kv.status()).replicas))));
  return { clusters, state, routes, hub, replicas };
}

/** Opens one existing bucket without creating it; fails if the hub has not created it yet. */
export async function openBucket(js: JetStreamClient, bucket: BucketName): Promise<KV> {
  const kv = await new Kvm(js).open(bucket);
  // open() is lazy: status() makes it fail now when the bucket is missing.
  await kv.status();
  return kv;
}
