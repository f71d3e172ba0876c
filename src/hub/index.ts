export { startHub, type HubHandle } from './hub.js';
export { HUB_DEFAULTS, HubOptionsSchema, hubOptionProblems, isLoopbackHost, parseHubOptions, type HubOptions } from './options.js';
export type { ClusterHealth } from './health.js';
export type { HubStatus, OperatorStatus } from './status.js';
