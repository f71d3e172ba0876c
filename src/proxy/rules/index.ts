export { createApiGuard } from './api-guard.js';
export { CircuitRules, type LimitVerdict } from './circuit-rules.js';
export { durationMs } from './duration.js';
export { startEgressProxy, type EgressProxy } from './egress-proxy.js';
export { FaultRules, inEffectiveTime, type FaultPlan } from './fault-rules.js';
export { type Call, type ResourceCall, type RestCall } from './matchers.js';
export { judge, type RuleClock, type RuleOutcome, type RuleSet } from './rule-set.js';
export { loadRules } from './rules-file.js';
export { TokenBucket } from './token-bucket.js';
