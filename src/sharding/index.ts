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
