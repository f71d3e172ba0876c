import { bucketOf, type HashSettings } from '../sharding/index.js';

/** Namespaces KusionStack's labelling skips, and so does ours by default. */
export const DEFAULT_SKIPPED_NAMESPACES: readonly string[] = ['kube-system', 'kube-public', 'default'];

/** The three labels of a namespace and of every related object in it: bucket, namespace name, control=true. */
export function meshLabels(namespace: string, settings: HashSettings): Record<string, string> {
  return {
    [settings.labels.hash]: String(bucketOf(namespace, settings)),
    [settings.labels.namespace]: namespace,
    [settings.labels.control]: 'true',
  };
}

/** The labels to set so that `current` carries `wanted`, or undefined when it already does. */
export function missingLabels(
  current: Readonly<Record<string, string>> | undefined,
  wanted: Readonly<Record<string, string>>,
): Record<string, string> | undefined {
  const missing = Object.fromEntries(Object.entries(wanted).filter(([k, v]) => current?.[k] !== v));
  return Object.keys(missing).length > 0 ? missing : undefined;
}
