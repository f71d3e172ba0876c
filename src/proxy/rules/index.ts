export { CircuitRules, type LimitVerdict } from './circuit-rules.js';
export { FaultRules, inEffectiveTime, type FaultPlan } from './fault-rules.js';
export { type Call, type ResourceCall, type RestCall } from './matchers.js';
export { emptyRules, judge, type RuleClock, type RuleOutcome, type RuleSet } from './rule-set.js';
export { type RuleSource, type RuleSourceHandlers } from './rule-source.js';
export { TokenBucket } from './token-bucket.js';
