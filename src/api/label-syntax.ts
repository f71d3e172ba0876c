/**
 * Kubernetes' syntax rules for label keys and values (apimachinery validation), so a selector we accept is one
 * the API server accepts too. Each check returns the reason it fails, or undefined.
 */
const NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A label key: `[prefix/]name`, prefix a DNS subdomain of at most 253 characters, name at most 63. */
export function labelKeyProblem(key: string): string | undefined {
  const slash = key.indexOf('/');
  const name = slash < 0 ? key : key.slice(slash + 1);
  if (slash >= 0) {
    const prefix = key.slice(0, slash);
    if (prefix.length === 0 || prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix)) {
      return `label key "${key}" has an invalid prefix: it must be a DNS subdomain (lowercase letters, digits, '-', '.'), at most 253 characters`;
    }
  }
  if (name.length === 0 || name.length > 63 || !NAME.test(name)) {
    return `label key "${key}" is invalid: the name part must be 1-63 characters, letters, digits, '-', '_', '.', starting and ending with a letter or digit`;
  }
  return undefined;
}

/** A label value: empty, or at most 63 characters of letters, digits, '-', '_', '.', alphanumeric at both ends. */
export function labelValueProblem(value: string): string | undefined {
  if (value === '') return undefined;
  if (value.length > 63 || !NAME.test(value)) {
    return `label value "${value}" is invalid: at most 63 characters, letters, digits, '-', '_', '.', starting and ending with a letter or digit`;
  }
  return undefined;
}

const CLUSTER_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/u;

/**
 * A member cluster's name, as the agent's `--cluster` and the hub's token file give it: a lower-case DNS label (dots
 * allowed), at most 63 characters. It names the cluster's subjects, KV keys and shards, and the identities minted for
 * it, whose JWTs take no other characters.
 */
export function clusterNameProblem(name: string): string | undefined {
  if (name.length > 63 || !CLUSTER_NAME.test(name)) {
    return `cluster "${name}" must be a lower-case DNS label (it names the cluster's subjects and shards)`;
  }
  return undefined;
}
