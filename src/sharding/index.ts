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
