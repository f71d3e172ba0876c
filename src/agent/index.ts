export { startAgent, type AgentHandle } from './agent.js';
export { AGENT_DEFAULTS, AgentOptionsSchema, agentOptionProblems, parseAgentOptions, type AgentOptions } from './options.js';
export { webhookConfigurationName } from './webhook.js';
export { ENABLE_PROXY_LABEL } from './sidecar-injection.js';
export { INJECT_PATH, PROXY_SECRET_KEYS, proxySecretName } from './sidecar-webhook.js';
