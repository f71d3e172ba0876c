export { CircuitRules, CompiledBreaker, type LimitVerdict } from './circuit-rules.js';
export { compileRule, ruleSetOf, type CompiledRule, type RuleIdentity, type RuleKind, type RuleOrigin } from './compiled-rule.js';
export { FaultRules, inEffectiveTime, type FaultPlan } from './fault-rules.js';
export { LiveRules, type LiveRulesOptions, type PodLabelsSource } from './live-rules.js';
export { type Call, type ResourceCall, type RestCall } from './matchers.js';
export { mergeRules, ruleKey, selectsPod, type MergeInput, type MergeResult, type PodLabels } from './merge.js';
export { emptyRules, judge, type RuleClock, type RuleOutcome, type RuleSet } from './rule-set.js';
export { type RuleSource, type RuleSourceHandlers } from './rule-source.js';
export { TokenBucket } from './token-bucket.js';
