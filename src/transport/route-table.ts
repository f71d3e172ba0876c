import { Type, type Static } from '@sinclair/typebox';
import { LabelSelectorSchema, ResourceGroupSchema } from '../api/index.js';

/**
 * The contract between the hub (which publishes) and each proxy (which enforces): everything one shard of one
 * operator may serve, per cluster. One KV key per (operator, shard); `version` only grows.
 */
export const ROUTE_TABLE_SCHEMA_VERSION = 1;

export const ClusterRouteSchema = Type.Object(
  {
    /** Registered cluster name. */
    name: Type.String({ minLength: 1 }),
    /** API server URL, e.g. https://10.0.0.1:6443. */
    server: Type.String({ minLength: 1 }),
    /** PEM CA bundle that signs the API server's serving certificate. */
    caPem: Type.String(),
    /** Hash buckets of this cluster the shard owns, sorted ascending; empty = owns nothing here. */
    buckets: Type.Array(Type.Integer({ minimum: 0 })),
    /**
     * Optional: which shard owns each bucket of this cluster that this shard does not (key: bucket number), so
     * the proxy's 403 for a stale or misrouted write can name the owner. Absent = owners unknown.
     */
    bucketOwners: Type.Optional(Type.Record(Type.String({ pattern: '^[0-9]+$' }), Type.String({ minLength: 1 }))),
    /** The ShardingConfig's own limits (ANDed with the bucket selector) for the resources they name. */
    limits: Type.Array(
      Type.Object(
        { relateResources: Type.Array(ResourceGroupSchema), selector: LabelSelectorSchema },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

export const RouteTableSchema = Type.Object(
  {
    schema: Type.Literal(ROUTE_TABLE_SCHEMA_VERSION),
    /** Operator identity: `<namespace>/<name>` of the root ShardingConfig, or of the hand-written config. */
    operator: Type.String({ minLength: 1 }),
    /** Shard name: the ShardingConfig (or generated child) name. */
    shard: Type.String({ minLength: 1 }),
    /** Monotonic version; a proxy applies only a greater one. */
    version: Type.Integer({ minimum: 0 }),
    issuedAt: Type.String({ format: 'date-time' }),
    /** The cluster unprefixed requests go to. */
    homeCluster: Type.String({ minLength: 1 }),
    leaderElectionName: Type.Optional(Type.String()),
    hashAlgorithm: Type.Union([Type.Literal('kusionstack'), Type.Literal('fnv')]),
    bucketCount: Type.Integer({ minimum: 1 }),
    labels: Type.Object(
      { hash: Type.String(), namespace: Type.String(), control: Type.String() },
      { additionalProperties: false },
    ),
    /** Seconds without contact to NATS after which the proxy stops serving (self-fencing). */
    leaseSeconds: Type.Integer({ minimum: 1 }),
    clusters: Type.Array(ClusterRouteSchema),
  },
  { additionalProperties: false },
);

export type ClusterRoute = Static<typeof ClusterRouteSchema>;
export type RouteTable = Static<typeof RouteTableSchema>;

/**
 * Why a cluster endpoint must not be used: a proxy sends its credentials to it, so it must be https and come with
 * the CA that verifies it. The hub refuses to register such a cluster and a proxy refuses a table naming one.
 */
export function endpointProblem(cluster: { server: string; caPem: string }): string | undefined {
  let url: URL;
  try {
    url = new URL(cluster.server);
  } catch {
    return `server "${cluster.server}" is not a URL`;
  }
  if (url.protocol !== 'https:') return `server "${cluster.server}" is not https: credentials would travel in clear`;
  if (!cluster.caPem.includes('-----BEGIN CERTIFICATE-----')) return `no CA certificate to verify ${cluster.server} with`;
  return undefined;
}
