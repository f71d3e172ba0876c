export { AGENT_DEFAULTS, startAgent, type AgentHandle, type AgentOptions } from './agent.js';
export { RegistrationError } from './register.js';
export type { WebhookTls } from './webhook.js';
export { webhookConfigurationName } from './webhook.js';
export { ENABLE_PROXY_LABEL, injectSidecar, type InjectionDecision, type SidecarOptions } from './sidecar-injection.js';
export { INJECT_PATH, PROXY_SECRET_KEYS, proxyCredsKey } from './sidecar-webhook.js';
