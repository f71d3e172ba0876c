/**
 * The Node server options a request timeout (`requestTimeout`: the whole request, head and body, must arrive within
 * it) needs to take effect. Node skips the check while `headersTimeout` is longer than `requestTimeout`, and fastify
 * sets `requestTimeout` after the server exists, where Node does not lower the 60 s default; and Node checks at
 * `connectionsCheckingInterval` (30 s by default), which a short timeout keeps to within half of itself.
 */
export function requestTimeoutChecks(requestTimeoutMs: number): { headersTimeout: number; connectionsCheckingInterval: number } {
  return {
    headersTimeout: Math.min(60_000, requestTimeoutMs),
    connectionsCheckingInterval: Math.min(30_000, Math.max(250, requestTimeoutMs / 2)),
  };
}
