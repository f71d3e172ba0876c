export { buildCrds, type StructuralSchema } from './crd.js';
export { API_GROUP, API_VERSION, KINDS } from './kinds.js';
export {
  LabelSelectorSchema,
  ResourceGroupSchema,
  type LabelSelector,
  type LabelSelectorRequirement,
  type ResourceGroup,
} from './label-selector.js';
export { clusterNameProblem, labelKeyProblem, labelValueProblem } from './label-syntax.js';
export { parseManifests } from './manifest-text.js';
export { DURATION_PATTERN, durationMs, formatDuration, parseDuration } from './duration.js';
export { checkOptions, ListenAddressSchema, Millis, ReadonlyList, type ListenAddress, type OptionsResult } from './options.js';
export { ObjectName, StringEnum } from './schema-types.js';
export { type CircuitBreakerModel, type CircuitBreakerSpec, type CircuitBreakerStatus } from './circuit-breaker.js';
export { type Condition } from './conditions.js';
export { type FaultInjectionModel, type FaultInjectionSpec, type FaultInjectionStatus } from './fault-injection.js';
export { OBJECT_LABELS, type ObjectLabels, type ShardLimit, type ShardingConfigModel, type ShardingConfigStatus } from './sharding-config.js';
export {
  formatProblems,
  schemaProblems,
  validateDocuments,
  validateManifest,
  type ValidationResult,
} from './validate.js';
