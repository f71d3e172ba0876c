export {
  ClusterRouteSchema,
  endpointProblem,
  ROUTE_TABLE_SCHEMA_VERSION,
  RouteTableSchema,
  type ClusterRoute,
  type RouteTable,
} from './route-table.js';
export { Buckets, Keys, Subjects, decodeToken, encodeToken, type BucketName } from './names.js';
export {
  AckSchema,
  RenewReplySchema,
  RenewRequestSchema,
  ClusterIdentitySchema,
  ClusterRecordSchema,
  ClusterReportSchema,
  HandoverStateSchema,
  HeartbeatSchema,
  MESSAGE_SCHEMA_VERSION,
  Messages,
  RegisterReplySchema,
  RegisterRequestSchema,
  type Ack,
  type RenewReply,
  type RenewRequest,
  type ClusterIdentity,
  type ClusterRecord,
  type ClusterReport,
  type Heartbeat,
  type MessageKind,
  type ObjectCount,
  type RegisterReply,
  type RegisterRequest,
  type ReportedNamespace,
  type ReportedObject,
  type ReportedPod,
  type HandoverRecord,
  type HandoverStateRecord,
} from './messages.js';
export { decodeMessage, encodeMessage, receiveMessage, type DecodeResult } from './codec.js';
export { connectNats, type ConnectOptions, type ConnectionEvent, type ConnectionState, type NatsLink } from './connection.js';
export { createBuckets, openBucket, type ControlBuckets, type CreateBucketsOptions } from './buckets.js';
export { createKeptBuckets, isStreamNotFound, isWrongRevision, type KeptBuckets } from './bucket-keeper.js';
export { watchKv, type Watch, type WatchKvOptions } from './kv-watch.js';
export { publishMessage, requestMessage, respondMessage, subscribeMessages, type SubscribeOptions } from './pubsub.js';
export { RouteTableKind, SignedEnvelopeSchema, openRenewal, openRouteTable, openSealed, routeSigner, type RouteSigner } from './route-signing.js';
export {
  natsConfigWarnings,
  serverIdentityCheck,
  natsConnectionOptions,
  credentialsPublicKey,
  credsJwt,
  inboxPrefixFor,
  type NatsClientConfig,
  type NatsCredentials,
} from './nats-config.js';
export {
  acknowledge,
  publishRouteTable,
  readRouteTable,
  receiveRouteTable,
  requestRenewal,
  serveRenewals,
  type RenewOptions,
  subscribeAcks,
  watchRouteTable,
  watchRouteTables,
  type AcknowledgeOptions,
  type WatchRouteTableOptions,
  type WatchRouteTablesOptions,
} from './routes.js';
