export { meshLabels } from '../sharding/index.js';

/** Namespaces KusionStack's labelling skips, and so does ours by default. */
export const DEFAULT_SKIPPED_NAMESPACES: readonly string[] = ['kube-system', 'kube-public', 'default'];

/** The labels to set so that `current` carries `wanted`, or undefined when it already does. */
export function missingLabels(
  current: Readonly<Record<string, string>> | undefined,
  wanted: Readonly<Record<string, string>>,
): Record<string, string> | undefined {
  const missing = Object.fromEntries(Object.entries(wanted).filter(([k, v]) => current?.[k] !== v));
  return Object.keys(missing).length > 0 ? missing : undefined;
}
