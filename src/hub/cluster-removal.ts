import type { KV } from '@nats-io/kv';
import { Keys, MESSAGE_SCHEMA_VERSION, Messages, encodeMessage } from '../transport/index.js';

/** The hub's buckets a removal writes: what the hub's own NATS identity may write (no other identity may). */
export interface RemovalBuckets {
  clusters: KV;
  state: KV;
}

/**
 * Removes a registered cluster from the fleet. The removal is stored first, so a registration racing it is refused,
 * or its record ignored, by every hub; then its agent's key binding is emptied, and its record and last report go.
 * The leader plans without it at once: its shards' units are revoked (handed over as ever) and its own units leave
 * every operator's span.
 * Returns false, changing nothing, for a cluster that is not registered.
 */
export async function removeCluster(buckets: RemovalBuckets, cluster: string, now: Date): Promise<boolean> {
  if ((await buckets.clusters.get(Keys.cluster(cluster)))?.operation !== 'PUT') return false;
  await buckets.state.put(Keys.removal(cluster), encodeMessage(Messages.clusterRemoval, { schema: MESSAGE_SCHEMA_VERSION, cluster, removedAt: now.toISOString() }));
  // No key bound: once readmitted, nothing is accepted under the cluster's identity until its token is exchanged
  // again, so a copy still valid then does not register it first (test/integration/reply-injection.test.ts, "a copy of
  // a cluster's identity changes no record once the token has bound another key, and does not register the cluster
  // again after a readmission").
  await buckets.state.put(Keys.agentKey(cluster), encodeMessage(Messages.agentKey, { schema: MESSAGE_SCHEMA_VERSION, cluster, boundAt: now.toISOString() }));
  await buckets.clusters.delete(Keys.cluster(cluster));
  await buckets.state.delete(Keys.report(cluster));
  return true;
}

/**
 * Lets a removed cluster register again (its agent then does, on its next start); false when it was not removed.
 * A record or report written while it was removed (by a hub that had not read the removal yet) goes first: the
 * cluster comes back by registering, never from what it said while removed: otherwise a registration that raced the
 * removal would bring it back unasked.
 */
export async function readmitCluster(buckets: RemovalBuckets, cluster: string): Promise<boolean> {
  if ((await buckets.state.get(Keys.removal(cluster)))?.operation !== 'PUT') return false;
  await buckets.clusters.delete(Keys.cluster(cluster));
  await buckets.state.delete(Keys.report(cluster));
  await buckets.state.delete(Keys.removal(cluster));
  return true;
}
