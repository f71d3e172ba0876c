import type { ObjectLabels } from '../api/index.js';
import type { HashAlgorithm } from './hash.js';

/**
 * How a shard's lists and watches are kept to its buckets in one cluster:
 * - `labels`: the agent labels namespaces and objects with their bucket; the proxy injects a label selector.
 * - `shardSelector`: the API server filters by hash range itself (KEP-5866); nothing is labelled.
 * - `proxyFilter`: nothing is labelled and the server cannot filter: the proxy filters lists and watches itself.
 */
export type ObjectSelection = 'labels' | 'shardSelector' | 'proxyFilter';

/**
 * The one rule, applied by the hub (for the route table) and the agent (for what it labels) alike: shard selectors
 * wherever the server has them and buckets are hash ranges (`fnv-range`), unless the config asks for labels anyway.
 */
export function objectSelection(input: { algorithm: HashAlgorithm; serverShardSelectors: boolean; objectLabels: ObjectLabels }): ObjectSelection {
  const { algorithm, serverShardSelectors, objectLabels } = input;
  if (objectLabels === 'Always') return 'labels';
  if (serverShardSelectors && algorithm === 'fnv-range') return 'shardSelector';
  return objectLabels === 'Never' ? 'proxyFilter' : 'labels';
}
