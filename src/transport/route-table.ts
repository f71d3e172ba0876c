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
    /**
     * How lists and watches are kept to the shard's buckets here (see `objectSelection`): absent means `labels`,
     * so a table of a labelled cluster is unchanged. `shardSelector`: the proxy sends hash ranges and checks the
     * server's echo; `proxyFilter`: the proxy filters what it reads itself.
     */
    selection: Type.Optional(Type.Union([Type.Literal('shardSelector'), Type.Literal('proxyFilter')])),
    /**
     * Resources whose objects belong to the bucket of their uid's hash instead of their namespace's (the config's
     * `spec.objectSharding`); absent = none.
     */
    objectSharding: Type.Optional(Type.Array(ResourceGroupSchema)),
    /**
     * Resources of no bucket the shard may write anyway (the config's `spec.unshardedWrites`: cluster-scoped built-ins,
     * `serviceaccounts/token`); absent = none, every such write refused.
     */
    unshardedWrites: Type.Optional(Type.Array(ResourceGroupSchema)),
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

/**
 * A CircuitBreaker or FaultInjection of the operator's namespace in the shard's home cluster, as the hub validated
 * it. The proxy applies it when `selector` matches its own pod's labels, after validating `manifest` again (it
 * builds its rules from it).
 */
export const TableRuleSchema = Type.Object(
  {
    kind: Type.Union([Type.Literal('CircuitBreaker'), Type.Literal('FaultInjection')]),
    namespace: Type.String({ minLength: 1 }),
    name: Type.String({ minLength: 1 }),
    generation: Type.Integer({ minimum: 0 }),
    /** `spec.selector`: the pods whose proxies apply it; absent selects every pod of the namespace. */
    selector: Type.Optional(LabelSelectorSchema),
    /** apiVersion, kind, metadata.name/namespace/generation and spec, as `validateManifest` takes it. */
    manifest: Type.Unknown(),
  },
  { additionalProperties: false },
);

/**
 * For an operator whose ShardingConfig has `spec.webhook`: where each shard's operator serves it, so a proxy can
 * send an AdmissionReview to the shard that owns the object (`clusters[].bucketOwners` says which shard that is).
 */
export const TableWebhookSchema = Type.Object(
  {
    /** The operator's webhook port (`spec.webhook.port`), on every pod of every shard. */
    port: Type.Integer({ minimum: 1, maximum: 65535 }),
    /** Ready pod IPs per shard (from the agents' reports); a shard without one cannot answer. */
    endpoints: Type.Record(Type.String({ minLength: 1 }), Type.Array(Type.String({ minLength: 1 }))),
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
    hashAlgorithm: Type.Union([Type.Literal('kusionstack'), Type.Literal('fnv'), Type.Literal('fnv-range')]),
    bucketCount: Type.Integer({ minimum: 1 }),
    labels: Type.Object(
      { hash: Type.String(), namespace: Type.String(), control: Type.String() },
      { additionalProperties: false },
    ),
    /** Seconds without contact to NATS after which the proxy stops serving (self-fencing). */
    leaseSeconds: Type.Integer({ minimum: 1 }),
    clusters: Type.Array(ClusterRouteSchema),
    /** Cluster rules for this shard's pods (absent: none; `--rules` files apply either way). */
    rules: Type.Optional(Type.Array(TableRuleSchema)),
    webhook: Type.Optional(TableWebhookSchema),
  },
  { additionalProperties: false },
);

export type ClusterRoute = Static<typeof ClusterRouteSchema>;
export type TableRule = Static<typeof TableRuleSchema>;
export type TableWebhook = Static<typeof TableWebhookSchema>;
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
