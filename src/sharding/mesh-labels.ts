import { bucketOf, type HashSettings } from './hash.js';

/**
 * The three labels of a namespace and of every object in it: bucket, namespace name, control=true. The agent writes
 * them; where nothing is labelled the proxy judges objects by these same values, computed from the namespace.
 */
export function meshLabels(namespace: string, settings: HashSettings): Record<string, string> {
  return {
    [settings.labels.hash]: String(bucketOf(namespace, settings)),
    [settings.labels.namespace]: namespace,
    [settings.labels.control]: 'true',
  };
}
