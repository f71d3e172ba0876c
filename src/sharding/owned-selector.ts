import type { LabelSelector } from '../api/index.js';
import type { HashSettings } from './hash.js';
import { compileSelector, mergeSelectors, type MergedSelector } from './selector.js';

/**
 * The selector a shard enforces in one cluster: its buckets there (`<hash label> in (...)`) AND the selector of the
 * ShardingConfig limit for the resource, if any. No buckets means nothing matches. The proxy compiles this once per
 * route table and merges each client selector into it with `mergeQuery`.
 */
export function ownedSelector(owned: { buckets: readonly number[]; limit?: LabelSelector; settings: HashSettings }): MergedSelector {
  const { buckets, limit, settings } = owned;
  if (buckets.length === 0) {
    return {
      requirements: [
        { key: settings.labels.hash, operator: 'Exists', values: [] },
        { key: settings.labels.hash, operator: 'DoesNotExist', values: [] },
      ],
      matchesNothing: true,
    };
  }
  const mine = compileSelector({ matchExpressions: [{ key: settings.labels.hash, operator: 'In', values: buckets.map(String) }] });
  return limit ? mergeSelectors(mine, compileSelector(limit)) : mergeSelectors(mine);
}
