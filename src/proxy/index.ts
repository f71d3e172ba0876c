export { type RequestGuard, type RequestPolicy } from './api-handler.js';
export {
  CircuitRules,
  FaultRules,
  TokenBucket,
  createApiGuard,
  durationMs,
  inEffectiveTime,
  judge,
  loadRules,
  startEgressProxy,
  type Call,
  type EgressProxy,
  type RuleClock,
  type RuleSet,
} from './rules/index.js';
export { type BreakerOptions } from './cluster-breaker.js';
export { decide, type Decision } from './enforce.js';
export { FileRouteSource } from './file-route-source.js';
export { NatsRouteSource, type NatsRouteSourceOptions } from './nats-route-source.js';
export { LockRenamer } from './leader-election.js';
export { leaseExpired } from './fencing.js';
export { startProxy, type ListenAddress, type ProxyConfig, type ProxyDeps, type RunningProxy } from './proxy-server.js';
export {
  DEFAULT_MAX_BODY_BYTES,
  isRefusal,
  isWrite,
  parseApiRequest,
  type ApiRequest,
  type Refusal,
  type RequestInfo,
  type ResourceRequest,
  type Verb,
} from './request/index.js';
export { type RouteSource, type RouteSourceHandlers } from './route-source.js';
export { operatorKubeconfig } from './operator-kubeconfig.js';
export { createKubeconfigWriter, type KubeconfigWriterOptions } from './kubeconfig-writer.js';
export { parseRouteTable, readRouteTable } from './route-table-file.js';
export { ClusterShardView } from './shard-view.js';
export { statusBody, type KubeStatus } from './status.js';
export { TableStore, parseStoredTable, type StoredTable } from './table-store.js';
export { loadCredentials } from './credentials.js';
export { type ClusterCredentials, type UpstreamOptions } from './upstream.js';
export { EXPIRED_EVENT, WatchEventFilter, type EventAdmission } from './watch-filter.js';
