import { Type, type Static, type TSchema } from '@sinclair/typebox';

/**
 * Every message on a ControllerMesh subject and every value in its KV buckets (route tables aside, see
 * route-table.ts). Each carries `schema`, the version of its shape: a receiver accepts only the versions it
 * knows, so a newer sender is refused loudly (logged) rather than misread.
 */
export const MESSAGE_SCHEMA_VERSION = 1;

const version = Type.Literal(MESSAGE_SCHEMA_VERSION);
const name = Type.String({ minLength: 1, maxLength: 253 });
const labels = Type.Record(Type.String(), Type.String());
const timestamp = Type.String({ format: 'date-time' });

/** What identifies a cluster to the hub: never its credentials. */
export const ClusterIdentitySchema = Type.Object(
  {
    name,
    labels,
    /** API server URL as reachable from the proxies. */
    server: Type.String({ minLength: 1 }),
    /** PEM CA bundle of the API server's serving certificate. */
    caPem: Type.String(),
  },
  { additionalProperties: false },
);

/** A NATS user's public nkey. */
const userKey = Type.String({ pattern: '^U[A-Z2-7]{55}$' });

/**
 * Sent on `ctrlmesh.register` with the bootstrap token bound to the cluster, or on `ctrlmesh.register.<cluster>`
 * under the cluster's own identity (no token; may re-point the cluster's server or CA).
 */
export const RegisterRequestSchema = Type.Object(
  {
    schema: version,
    token: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
    cluster: ClusterIdentitySchema,
    /** The agent's user nkey: the hub answers with a user JWT for it when it mints identities. */
    publicKey: Type.Optional(userKey),
  },
  { additionalProperties: false },
);

export const RegisterReplySchema = Type.Object(
  {
    schema: version,
    ok: Type.Boolean(),
    /** Set when refused: what was wrong and what to do. */
    error: Type.Optional(Type.String()),
    /** The agent's user JWT (permissions of its cluster only), for the public key of the request. */
    jwt: Type.Optional(Type.String({ minLength: 1 })),
  },
  { additionalProperties: false },
);

/** The registry entry (bucket ctrlmesh-clusters). */
export const ClusterRecordSchema = Type.Object(
  { schema: version, cluster: ClusterIdentitySchema, registeredAt: timestamp, updatedAt: timestamp },
  { additionalProperties: false },
);

/**
 * A cluster removed from the fleet (`ctrlmesh clusters remove`), stored at key removed.<cluster>: the hub refuses
 * its registrations and plans without it until the record is deleted (`ctrlmesh clusters readmit`).
 */
export const ClusterRemovalSchema = Type.Object({ schema: version, cluster: name, removedAt: timestamp }, { additionalProperties: false });

/**
 * The public key a cluster's agent was last minted an identity for with its bootstrap token, stored at key
 * agentkey.<cluster>: under the cluster's own identity the hub renews for that key only. Without one (written when
 * the cluster is removed), it renews for no key until the token is exchanged again. A key of its own, not a field of
 * the ClusterRecord, so that hubs of earlier versions (which refuse unknown fields) read the registry as before.
 */
export const AgentKeySchema = Type.Object(
  {
    schema: version,
    cluster: name,
    publicKey: Type.Optional(userKey),
    /**
     * Whether the agent proved it holds the key when it was bound (it signed that request, message-proof.ts): then
     * what the cluster's identity sends (registrations that change the record, reports, heartbeats) counts only signed with it.
     * An agent of an earlier version signs nothing, and its messages count unsigned.
     */
    signs: Type.Optional(Type.Boolean()),
    boundAt: timestamp,
  },
  { additionalProperties: false },
);

export const HeartbeatSchema = Type.Object(
  {
    schema: version,
    cluster: name,
    sentAt: timestamp,
    /** Whether the agent's informers are in sync with its API server. */
    apiServerReachable: Type.Boolean(),
  },
  { additionalProperties: false },
);

/** A custom resource as reported: identity and spec, validated by whoever uses it. */
export const ReportedObjectSchema = Type.Object(
  {
    namespace: Type.String(),
    name,
    generation: Type.Integer({ minimum: 0 }),
    labels: Type.Optional(labels),
    /** The whole manifest (apiVersion, kind, metadata.name/namespace, spec), as validation wants it. */
    manifest: Type.Unknown(),
  },
  { additionalProperties: false },
);

export const ReportedPodSchema = Type.Object(
  {
    namespace: Type.String(),
    name,
    labels,
    ready: Type.Boolean(),
    /** status.podIP, once assigned. */
    ip: Type.Optional(Type.String({ minLength: 1, maxLength: 45 })),
    /** The shard (`<cluster>/<config>`) the pod runs, as the sidecar injector decides it. */
    shard: Type.Optional(name),
  },
  { additionalProperties: false },
);

export const ReportedNamespaceSchema = Type.Object({ name, labels }, { additionalProperties: false });

/** Objects of one related resource in one namespace (the planner's weights). */
export const ObjectCountSchema = Type.Object(
  // At most a billion: the planner sums counts into weights, and a report of 1e308 made every sum Infinity.
  { namespace: Type.String(), resource: Type.String({ minLength: 1 }), count: Type.Integer({ minimum: 0, maximum: 1_000_000_000 }) },
  { additionalProperties: false },
);

/** An agent's full view of its cluster; sent whole on every debounced change (stored at key report.<cluster>). */
export const ClusterReportSchema = Type.Object(
  {
    schema: version,
    cluster: name,
    sentAt: timestamp,
    /** How this cluster's agent labels namespaces (the proxies' selectors must use the same). */
    hash: Type.Object(
      {
        algorithm: Type.Union([Type.Literal('kusionstack'), Type.Literal('fnv'), Type.Literal('fnv-range')]),
        bucketCount: Type.Integer({ minimum: 1, maximum: 65536 }),
        labels: Type.Object({ hash: Type.String(), namespace: Type.String(), control: Type.String() }, { additionalProperties: false }),
      },
      { additionalProperties: false },
    ),
    /**
     * Whether this cluster's API server filters lists and watches by `shardSelector` (KEP-5866), as the agent found
     * by asking it: a list must come back with `metadata.shardInfo`. Absent: no (an older agent).
     */
    shardSelectors: Type.Optional(Type.Boolean()),
    shardingConfigs: Type.Array(ReportedObjectSchema),
    circuitBreakers: Type.Array(ReportedObjectSchema),
    faultInjections: Type.Array(ReportedObjectSchema),
    pods: Type.Array(ReportedPodSchema),
    namespaces: Type.Array(ReportedNamespaceSchema),
    objectCounts: Type.Array(ObjectCountSchema),
  },
  { additionalProperties: false },
);

export const AckSchema = Type.Object(
  {
    schema: version,
    operator: Type.String({ minLength: 1 }),
    shard: Type.String({ minLength: 1 }),
    /** The route-table version the proxy has applied. */
    version: Type.Integer({ minimum: 0 }),
    /** Which proxy (pod) acknowledges; informational. */
    from: Type.Optional(Type.String()),
    /**
     * The table's cluster rules this proxy has in force (those whose selector matches its pod). Sent again for the
     * same version when that set changes; the agents write it into the rules' status.
     */
    rules: Type.Optional(
      Type.Array(
        Type.Object(
          {
            kind: Type.Union([Type.Literal('CircuitBreaker'), Type.Literal('FaultInjection')]),
            namespace: Type.String({ minLength: 1 }),
            name,
            generation: Type.Integer({ minimum: 0 }),
          },
          { additionalProperties: false },
        ),
        { maxItems: 1000 },
      ),
    ),
    ackedAt: timestamp,
  },
  { additionalProperties: false },
);

/**
 * A proxy asks the hub leader to extend its shard's lease (`ctrlmesh.renew.<operator>.<shard>`). It starts its own
 * lease clock before sending, so the lease it holds can only end before the one the hub counts.
 */
export const RenewRequestSchema = Type.Object(
  {
    schema: version,
    operator: Type.String({ minLength: 1 }),
    shard: Type.String({ minLength: 1 }),
    /** The latest route-table version this proxy applied and acknowledged (its writes under older ones answered). */
    acknowledged: Type.Integer({ minimum: 0 }),
    /** Echoed in the reply: an old reply cannot be replayed as a new one. */
    nonce: Type.String({ minLength: 8, maxLength: 64 }),
  },
  { additionalProperties: false },
);

/** The hub leader's answer, signed with its route-signing key. */
export const RenewReplySchema = Type.Object(
  {
    schema: version,
    operator: Type.String({ minLength: 1 }),
    shard: Type.String({ minLength: 1 }),
    nonce: Type.String({ minLength: 8, maxLength: 64 }),
    /** The version the hub has published for the shard (0: none). */
    version: Type.Integer({ minimum: 0 }),
    /** Extended only when the proxy acknowledged that version: a proxy behind the hub is not renewed. */
    extended: Type.Boolean(),
  },
  { additionalProperties: false },
);

/** The KV data a feed carries: `routes` (route tables), `acks` (the acknowledgements the hub leader stored). */
export const FeedKindSchema = Type.Union([Type.Literal('routes'), Type.Literal('acks')]);

/** A proxy or an agent asks a hub to open a feed (a consumer the hub makes, delivering to the requester's feed subject). */
export const WatchRequestSchema = Type.Object(
  {
    schema: version,
    feed: FeedKindSchema,
    /** Names the feed subject (a NUID): the requester subscribes to it before asking. */
    id: Type.String({ pattern: '^[A-Za-z0-9]{8,32}$' }),
    /** Resume after the last revision seen, in the stream created at `streamCreated`; absent = the current values. */
    from: Type.Optional(
      Type.Object({ revision: Type.Integer({ minimum: 1 }), streamCreated: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false }),
    ),
  },
  { additionalProperties: false },
);

/** A hub's answer: the feed is open (delivering), or why not. */
export const WatchReplySchema = Type.Object(
  {
    schema: version,
    ok: Type.Boolean(),
    error: Type.Optional(Type.String()),
    /** The consumer's name, in the metadata of every message it delivers. */
    consumer: Type.Optional(Type.String({ minLength: 1 })),
    /** When the bucket's stream was created: another than the request's means it was created again (read it from the start). */
    streamCreated: Type.Optional(Type.String({ minLength: 1 })),
    /** How many messages the feed delivers before it is current (consumer sequences 1..initial). */
    initial: Type.Optional(Type.Integer({ minimum: 0 })),
    /** Idle heartbeat of the feed, ms: a feed silent for longer is reopened. */
    heartbeatMs: Type.Optional(Type.Integer({ minimum: 1 })),
  },
  { additionalProperties: false },
);

const HandoverRecordSchema = Type.Object(
  {
    /** `<bucket>@<cluster>`. */
    unit: Type.String({ minLength: 3 }),
    from: Type.String({ minLength: 1 }),
    to: Type.Union([Type.String({ minLength: 1 }), Type.Null()]),
    /** Milliseconds since the epoch, as the hub saw them. */
    revokedAt: Type.Number(),
    revokeVersion: Type.Integer({ minimum: 0 }),
    acknowledgedAt: Type.Optional(Type.Number()),
    grantedAt: Type.Optional(Type.Number()),
    grantedBy: Type.Optional(Type.Union([Type.Literal('ack'), Type.Literal('lease-expiry'), Type.Literal('back-to-owner')])),
  },
  { additionalProperties: false },
);

/** The hub's handover bookkeeping for one operator (state bucket, key handover.<operator>). */
export const HandoverStateSchema = Type.Object(
  {
    schema: version,
    operator: Type.String({ minLength: 1 }),
    /** Units per shard that the published route tables grant. */
    effective: Type.Record(Type.String(), Type.Array(Type.String())),
    pending: Type.Array(HandoverRecordSchema),
    history: Type.Array(HandoverRecordSchema),
  },
  { additionalProperties: false },
);

export type ClusterIdentity = Static<typeof ClusterIdentitySchema>;
export type RegisterRequest = Static<typeof RegisterRequestSchema>;
export type RegisterReply = Static<typeof RegisterReplySchema>;
export type ClusterRecord = Static<typeof ClusterRecordSchema>;
export type Heartbeat = Static<typeof HeartbeatSchema>;
export type ReportedObject = Static<typeof ReportedObjectSchema>;
export type ClusterRemoval = Static<typeof ClusterRemovalSchema>;
export type AgentKey = Static<typeof AgentKeySchema>;
export type ReportedPod = Static<typeof ReportedPodSchema>;
export type ReportedNamespace = Static<typeof ReportedNamespaceSchema>;
export type ObjectCount = Static<typeof ObjectCountSchema>;
export type ClusterReport = Static<typeof ClusterReportSchema>;
export type Ack = Static<typeof AckSchema>;
export type RenewRequest = Static<typeof RenewRequestSchema>;
export type RenewReply = Static<typeof RenewReplySchema>;
export type FeedKind = Static<typeof FeedKindSchema>;
export type WatchRequest = Static<typeof WatchRequestSchema>;
export type WatchReply = Static<typeof WatchReplySchema>;
export type HandoverRecord = Static<typeof HandoverRecordSchema>;
export type HandoverStateRecord = Static<typeof HandoverStateSchema>;

/**
 * Whether two reports say the same thing (send time aside): the agent does not send an unchanged report again, and
 * the hub does not store one.
 */
export function sameReport(a: ClusterReport, b: ClusterReport): boolean {
  return JSON.stringify({ ...a, sentAt: '' }) === JSON.stringify({ ...b, sentAt: '' });
}

/** A schema together with the name logs use for it. */
export interface MessageKind<S extends TSchema> {
  kind: string;
  schema: S;
}

export const Messages = {
  registerRequest: { kind: 'RegisterRequest', schema: RegisterRequestSchema },
  registerReply: { kind: 'RegisterReply', schema: RegisterReplySchema },
  clusterRecord: { kind: 'ClusterRecord', schema: ClusterRecordSchema },
  clusterRemoval: { kind: 'ClusterRemoval', schema: ClusterRemovalSchema },
  agentKey: { kind: 'AgentKey', schema: AgentKeySchema },
  heartbeat: { kind: 'Heartbeat', schema: HeartbeatSchema },
  clusterReport: { kind: 'ClusterReport', schema: ClusterReportSchema },
  ack: { kind: 'Ack', schema: AckSchema },
  renewRequest: { kind: 'RenewRequest', schema: RenewRequestSchema },
  renewReply: { kind: 'RenewReply', schema: RenewReplySchema },
  watchRequest: { kind: 'WatchRequest', schema: WatchRequestSchema },
  watchReply: { kind: 'WatchReply', schema: WatchReplySchema },
  handoverState: { kind: 'HandoverState', schema: HandoverStateSchema },
} as const;
