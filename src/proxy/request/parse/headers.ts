/**
 * Hop-by-hop headers (RFC 9110 7.6.1, and HTTP/2's upgrade settings): they describe one connection, not the request,
 * and are never passed on; nor is what a `Connection` header names.
 */
export const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authorization',
  'proxy-authenticate',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
]);

/**
 * Headers that never cross the proxy to the API server: hop-by-hop headers (an `Upgrade` among them would make the
 * API server switch protocols on a request judged as plain) and headers that carry authority. The proxy speaks to
 * the API server with its own identity, so a client's credentials, impersonation or front-proxy identity headers
 * would borrow that identity's power.
 */
const DROPPED = new Set([...HOP_BY_HOP, 'host', 'expect', 'authorization']);

export interface HeaderPolicy {
  /** Keep `Impersonate-*` (the operator acts as other users with the proxy's identity's impersonate rights). */
  allowImpersonation: boolean;
}

function dropped(name: string, policy: HeaderPolicy): boolean {
  return DROPPED.has(name) || name.startsWith('x-remote-') || (!policy.allowImpersonation && name.startsWith('impersonate-'));
}

/** Removes, in place, every header the API server must not see from the client (lower-case names, as Node gives them). */
export function stripHeaders(headers: Record<string, string | string[] | undefined>, policy: HeaderPolicy): void {
  const connection = headers.connection;
  const named = typeof connection === 'string' ? connection.toLowerCase().split(',').map((s) => s.trim()) : [];
  for (const name of Object.keys(headers)) {
    if (dropped(name, policy) || named.includes(name)) delete headers[name];
  }
}

/** The same judgement for a raw header list (name, value, name, value...), as an upgrade receives it. */
export function keptRawHeaders(raw: readonly string[], policy: HeaderPolicy, keep: ReadonlySet<string>): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (keep.has(name) || !dropped(name, policy)) out.push([raw[i]!, raw[i + 1]!]);
  }
  return out;
}
