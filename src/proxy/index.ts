export { startProxy, type RunningProxy } from './proxy-server.js';
export { PROXY_DEFAULTS, PROXY_WEBHOOK_DEFAULTS, ProxyConfigSchema, parseProxyConfig, proxyConfigProblems, type ProxyConfig } from './options.js';
export { createApiGuard } from './request/judgement/rules-guard.js';
export { type RequestGuard } from './request/judgement/rules-guard.js';
export { decide } from './request/judgement/enforce.js';
export {
  DEFAULT_MAX_BODY_BYTES,
  isRefusal,
  parseApiRequest,
  type ApiRequest,
  type RequestInfo,
  type ResourceRequest,
} from './request/parse/index.js';
export { EXPIRED_EVENT, WatchEventFilter } from './request/answer/watch-filter.js';
export { startEgressProxy } from './egress/egress-proxy.js';
export { FileRouteSource } from './routes/file-route-source.js';
export { createKubeconfigWriter } from './routes/kubeconfig-writer.js';
export { LockRenamer, shardLockName } from './routes/leader-election.js';
export { DEFAULT_MESH_SECRET, MeshObjects } from './routes/mesh-objects.js';
export { bootId, monotonicNow, systemLeaseClock, type LeaseClock } from './routes/lease-clock.js';
export { NatsRouteSource } from './routes/nats-route-source.js';
export { operatorKubeconfig } from './routes/operator-kubeconfig.js';
export { type RouteSource, type RouteSourceHandlers } from './routes/route-source.js';
export { parseRouteTable, readRouteTableFile } from './routes/route-table-file.js';
export { ClusterShardView } from './routes/shard-view.js';
export { TableStore, parseStoredTable } from './routes/table-store.js';
export { FileRuleSource } from './rule-files/file-rule-source.js';
export { liveRulesFromFiles } from './rule-files/live-rule-files.js';
export { PodLabelsFile, readPodLabels } from './rule-files/pod-labels-file.js';
export { MAX_POD_LABELS_BYTES, parsePodLabels, unquoteGo } from './rule-files/pod-labels.js';
export { loadRuleFiles, loadRules } from './rule-files/rules-file.js';
export { LiveRules, judge, mergeRules, type RuleSet, type RuleSource } from './rules/index.js';
export { loadCredentials, type BreakerOptions } from './upstream/index.js';
