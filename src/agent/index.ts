export { AGENT_DEFAULTS, startAgent, type AgentHandle, type AgentOptions } from './agent.js';
export { webhookConfigurationName } from './webhook.js';
export { ENABLE_PROXY_LABEL } from './sidecar-injection.js';
export { INJECT_PATH, PROXY_SECRET_KEYS, proxyCredsKey } from './sidecar-webhook.js';
