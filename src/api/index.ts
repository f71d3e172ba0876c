export { buildCrds, toStructural, type CustomResourceDefinition, type StructuralSchema } from './crd.js';
export { childPath, pointerToPath, type FieldProblem } from './field-problem.js';
export { API_GROUP, API_VERSION, KINDS, type KindDefinition, type ManifestModel } from './kinds.js';
export {
  LabelSelectorRequirementSchema,
  LabelSelectorSchema,
  ResourceGroupSchema,
  labelSelectorProblems,
  type LabelSelector,
  type LabelSelectorRequirement,
  type ResourceGroup,
} from './label-selector.js';
export { labelKeyProblem, labelValueProblem } from './label-syntax.js';
export { type CircuitBreakerModel, type CircuitBreakerSpec } from './circuit-breaker.js';
export { type FaultInjectionModel, type FaultInjectionSpec } from './fault-injection.js';
export {
  type RootModel,
  type ShardLimit,
  type ShardingConfigModel,
  type ShardingConfigSpec,
  type ShardingConfigStatus,
} from './sharding-config.js';
export {
  formatProblems,
  schemaProblems,
  validateDocuments,
  validateManifest,
  type DocumentReport,
  type ValidateOptions,
  type ValidationResult,
} from './validate.js';
