import type { HashSettings } from './hash.js';
import { keepPoints, namespaceHash, rangesOfBuckets, removePoints, type HashRanges } from './hash-ranges.js';
import { matches, type Requirement, type Requirements } from './selector.js';

/**
 * A shard's part of a list or watch where nothing is labelled: the namespace-hash ranges that its buckets and the
 * limits' requirements on the mesh labels leave, and the limits' other requirements, which stay a label selector.
 */
export interface RangeSelector {
  /** Empty when nothing can match. */
  ranges: HashRanges;
  labels: Requirements;
}

/**
 * Turns requirements on the mesh labels into ranges, reading each as the object's namespace would label it (its
 * bucket, its name, control=true), so the API server's filter keeps exactly what the proxy's event filter admits.
 */
export function rangeSelector(input: { buckets: Iterable<number>; limits: Requirements; settings: HashSettings }): RangeSelector {
  const { settings, limits } = input;
  const keys = settings.labels;
  let buckets = [...input.buckets];
  const labels: Requirement[] = [];
  const onNamespace: Requirement[] = [];
  let nothing = false;
  for (const req of limits) {
    if (req.key === keys.hash) buckets = buckets.filter((b) => matches([req], { [keys.hash]: String(b) }));
    else if (req.key === keys.control) nothing ||= !matches([req], { [keys.control]: 'true' });
    else if (req.key === keys.namespace) onNamespace.push(req);
    else labels.push(req);
  }
  if (nothing) return { ranges: [], labels };
  let ranges = rangesOfBuckets(buckets, settings.bucketCount);
  for (const req of onNamespace) {
    if (req.operator === 'In') ranges = keepPoints(ranges, req.values.map(namespaceHash));
    else if (req.operator === 'NotIn') ranges = removePoints(ranges, req.values.map(namespaceHash));
    else if (req.operator === 'DoesNotExist') ranges = [];
  }
  return { ranges, labels };
}
