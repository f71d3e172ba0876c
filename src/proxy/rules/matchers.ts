/** One Kubernetes API call as rules see it. */
export interface ResourceCall {
  kind: 'resource';
  verb: string;
  group: string;
  resource: string;
  /** `exec` of `pods/exec`; undefined for the resource itself. */
  subresource?: string | undefined;
  namespace: string | undefined;
}

/** One external REST call through the proxy's HTTP proxy port. `path` is undefined for a CONNECT tunnel. */
export interface RestCall {
  kind: 'rest';
  method: string;
  host: string;
  path: string | undefined;
  /** The full URL when known; `https://host/` for a CONNECT tunnel, which can only be judged by host. */
  url: string;
}

export type Call = ResourceCall | RestCall;

/** How specifically a list names a value: 2 exact, 1 wildcard, undefined no match. Absent list = wildcard. */
export function listScore(list: readonly string[] | undefined, value: string | undefined): number | undefined {
  if (list === undefined || list.length === 0 || list.includes('*')) return 1;
  return value !== undefined && list.includes(value) ? 2 : undefined;
}

/**
 * How specifically a rule's resources name a call's: `pods` names pods and every subresource of theirs (1 for a
 * subresource, 2 for the resource itself), `pods/exec` that subresource alone (2); a wildcard list 1.
 */
function resourceListScore(list: readonly string[] | undefined, resource: string, subresource: string | undefined): number | undefined {
  if (subresource === undefined) return listScore(list, resource);
  if (list !== undefined && list.includes(`${resource}/${subresource}`)) return 2;
  const whole = listScore(list, resource);
  return whole === undefined ? undefined : 1;
}

/** Specificity of a resource rule for a call (sum over its four lists), or undefined if it does not match. */
export function resourceScore(
  rule: { apiGroups?: readonly string[]; resources?: readonly string[]; verbs?: readonly string[]; namespaces?: readonly string[] },
  call: ResourceCall,
): number | undefined {
  const scores = [
    listScore(rule.apiGroups, call.group),
    resourceListScore(rule.resources, call.resource, call.subresource),
    listScore(rule.verbs, call.verb),
    listScore(rule.namespaces, call.namespace),
  ];
  return scores.some((s) => s === undefined) ? undefined : scores.reduce((a: number, b) => a + b!, 0);
}

/** A URL pattern where `*` matches any run of characters, compiled once. */
export function globToRegExp(pattern: string): RegExp {
  return new RegExp(`^${pattern.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
}

/** The literal length of a glob: longer literal = more specific. */
export function globScore(pattern: string): number {
  return pattern.replaceAll('*', '').length;
}
