export {
  compileSelector,
  matches,
  mergeQuery,
  mergeSelectors,
  parseSelector,
  renderSelector,
  type Requirement,
  type Requirements,
} from './selector.js';
export {
  DEFAULT_BUCKET_COUNT,
  DEFAULT_LABEL_KEYS,
  HASH_ALGORITHMS,
  bucketOf,
  createHashSettings,
  fnv1a32,
  fnv1a64,
  fnvBucket,
  kusionstackBucket,
  type HashAlgorithm,
  type HashSettings,
  type HashSettingsInput,
} from './hash.js';
export { expandRoot } from './auto-sharding.js';
export { balanceBound } from './balance.js';
export { UNIT_BASE_WEIGHT } from './fleet.js';
export { Planner, plan, type PlanChange } from './planner.js';
export {
  parsePlanDocument,
  type Assignment,
  type ClusterHealth,
  type OperatorInput,
  type PlanInput,
  type PlanResult,
} from './plan-format.js';
export {
  bucketsOfLimits,
  shardOfPod,
  shardsOfConfig,
  shardsOfConfigs,
  type ConfigHome,
  type ConfigShard,
  type ConfigShards,
} from './config-shards.js';
export { operatorInput, operatorsFromConfigs } from './operators-from-configs.js';
export { ownedSelector } from './owned-selector.js';
export { homeClusterOf, shardName } from './shard-name.js';
export {
  bucketsOfUnits,
  compareUnits,
  parseUnitKey,
  unitKey,
  unitsOfBuckets,
  type Ownership,
  type UnitKey,
} from './units.js';
export {
  HASH_SPACE_END,
  NAMESPACE_FIELD,
  UID_FIELD,
  bucketRange,
  keepPoints,
  namespaceHash,
  normalizeRanges,
  rangesOfBuckets,
  removePoints,
  renderShardSelector,
  type HashRange,
  type HashRanges,
} from './hash-ranges.js';
export { objectSelection, type ObjectSelection } from './object-selection.js';
export { meshLabels } from './mesh-labels.js';
export { rangeSelector, type RangeSelector } from './range-selector.js';
export { HashOptionsSchema, hashOptionsProblem, type HashOptions } from './hash-options.js';
