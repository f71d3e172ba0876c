export {
  SelectorSyntaxError,
  compileSelector,
  matches,
  mergeQuery,
  mergeSelectors,
  parseSelector,
  renderSelector,
  toLabelSelector,
  type MergedSelector,
  type Requirement,
  type Requirements,
  type SelectorOperator,
} from './selector.js';
export {
  DEFAULT_BUCKET_COUNT,
  DEFAULT_LABEL_KEYS,
  HASH_ALGORITHMS,
  InvalidConfigError,
  bucketOf,
  createHashSettings,
  fnv1a32,
  kusionstackBucket,
  type HashAlgorithm,
  type HashSettings,
  type HashSettingsInput,
  type ShardLabelKeys,
} from './hash.js';
export { POD_NAME_LABEL, expandRoot, type AutoShard } from './auto-sharding.js';
export { BALANCE_TOLERANCE, balance, balanceBound, type BalanceProblem } from './balance.js';
export { UNIT_BASE_WEIGHT } from './fleet.js';
export { Planner, plan, type PlanChange } from './planner.js';
export {
  AssignmentSchema,
  CLUSTER_HEALTH,
  PlanInputSchema,
  parsePlanDocument,
  type Assignment,
  type ClusterHealth,
  type ClusterInfo,
  type Move,
  type OperatorInput,
  type OperatorStats,
  type PlanInput,
  type PlanResult,
  type ShardInput,
} from './plan-format.js';
export { bucketsOfLimits, operatorsFromConfigs } from './operators-from-configs.js';
export { ownedSelector } from './owned-selector.js';
