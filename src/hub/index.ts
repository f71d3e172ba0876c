export { startHub, type HubDependencies, type HubHandle } from './hub.js';
export { HUB_DEFAULTS, hubOptionProblems, type HubOptions } from './options.js';
export type { ClusterHealth, HealthThresholds } from './health.js';
export type { ClusterStatus, HubStatus, OperatorStatus, ShardStatus } from './status.js';
