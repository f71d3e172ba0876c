export {
  endpointProblem,
  ROUTE_TABLE_SCHEMA_VERSION,
  RouteTableSchema,
  type ClusterRoute,
  type TableRule,
  type TableWebhook,
  type RouteTable,
} from './route-table.js';
export { Buckets, Keys, Subjects, decodeToken, encodeToken, type BucketName } from './names.js';
export {
  MESSAGE_SCHEMA_VERSION,
  Messages,
  sameReport,
  type Ack,
  type AgentKey,
  type ClusterIdentity,
  type ClusterRecord,
  type ClusterRemoval,
  type ClusterReport,
  type FeedKind,
  type Heartbeat,
  type ObjectCount,
  type RegisterReply,
  type RegisterRequest,
  type WatchReply,
  type WatchRequest,
  type ReportedObject,
  type HandoverRecord,
  type HandoverStateRecord,
} from './messages.js';
export { decodeMessage, encodeMessage, receiveMessage } from './codec.js';
export { connectNats, type NatsLink } from './connection.js';
export { createBuckets, openBucket, type ControlBuckets } from './buckets.js';
export { createKeptBuckets, isWrongRevision, type KeptBuckets } from './bucket-keeper.js';
export { watchKv } from './kv-watch.js';
export type { Watch } from './reopened.js';
export { watchFeed, type FeedEntry } from './feed-watch.js';
export { FEED_HEARTBEAT_MS, FEEDS_PER_REQUESTER, serveWatches } from './feed-server.js';
export { DROP_LOG_INTERVAL_MS, peerDrops, publishMessage, replyInboxKey, requestMessage, respondMessage, subscribeMessages } from './pubsub.js';
export { RouteTableKind, openRouteTable, routeSigner, type RouteSigner } from './route-signing.js';
export {
  natsConfigWarnings,
  serverIdentityCheck,
  natsConnectionOptions,
  credsJwt,
  inboxPrefixFor,
  NatsClientConfigSchema,
  type NatsClientConfig,
  type NatsCredentials,
} from './nats-config.js';
export {
  acknowledge,
  publishRouteTable,
  publishSealedRouteTable,
  receiveRouteTable,
  requestRenewal,
  serveRenewals,
  subscribeAcks,
  watchRouteTable,
  watchRouteTables,
  watchStoredAcks,
  type AckRule,
} from './routes.js';
export { PROOF_HEADER, PROOF_SKEW_MS, messageProvenAt, proveMessage, signableNonce } from './message-proof.js';
