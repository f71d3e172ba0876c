export { createRegistry } from './registry.js';
export { registerOpsRoutes } from './ops-routes.js';
export { BREAKER_STATE_VALUE, createProxyMetrics, showRulesInForce, type ProxyMetrics } from './proxy.js';
export { createHubMetrics, type HubMetrics } from './hub.js';
export { createAgentMetrics, type AgentMetrics } from './agent.js';
