export { AGENT_DEFAULTS, startAgent, type AgentHandle, type AgentOptions } from './agent.js';
export { RegistrationError } from './register.js';
export type { WebhookTls } from './webhook.js';
export { webhookConfigurationName } from './webhook.js';
