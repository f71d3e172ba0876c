import type { RouteTable } from '../../transport/index.js';
import type { ClusterShardView } from '../routes/shard-view.js';

/**
 * Where one admission review goes: the local operator, the owning shard's pods, or nowhere (503, so the API server
 * applies the webhook's failurePolicy). `owner` is the shard that answers or should have ('' when none is known).
 */
export type WebhookRoute =
  | { route: 'local'; owner: string }
  | { route: 'forwarded'; owner: string; addresses: readonly string[] }
  | { route: 'unowned'; owner: string; reason: string };

export interface WebhookRouteInput {
  /** The table in force; undefined before the first one. */
  table: RouteTable | undefined;
  /** Its home cluster's view (the API server calling the webhook is the home cluster's). */
  home: ClusterShardView | undefined;
  fenced: boolean;
  /** The namespace deciding the owner (ReviewTarget.namespace); undefined: a cluster-scoped object. */
  namespace: string | undefined;
}

/**
 * The route of a review by the current table (pure): its own buckets of the home cluster are answered locally, a
 * bucket `bucketOwners` gives to another shard goes to that shard's ready pods (`webhook.endpoints`); a bucket in
 * flight between shards, a shard without a ready pod or a fenced proxy answer nothing.
 */
export function webhookRoute(input: WebhookRouteInput): WebhookRoute {
  const { table, home, namespace } = input;
  const self = table?.shard ?? '';
  if (namespace === undefined) return { route: 'local', owner: self };
  if (!table || !home) return { route: 'unowned', owner: '', reason: table ? `the table has no home cluster ${table.homeCluster}` : 'no route table yet' };
  if (input.fenced) return { route: 'unowned', owner: '', reason: 'fenced: the proxy cannot tell who owns what' };
  const bucket = home.bucketOf(namespace);
  if (home.owned.has(bucket)) return { route: 'local', owner: self };
  const owner = home.ownerOf(bucket);
  if (owner === undefined) return { route: 'unowned', owner: '', reason: `bucket ${bucket} of ${home.name} is granted to no shard (a handover in flight)` };
  const addresses = table.webhook?.endpoints[owner] ?? [];
  if (addresses.length === 0) return { route: 'unowned', owner, reason: `shard ${owner}, which owns bucket ${bucket}, has no ready pod` };
  return { route: 'forwarded', owner, addresses };
}
