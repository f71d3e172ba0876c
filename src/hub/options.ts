import type { HealthThresholds } from './health.js';

export interface HubOptions {
  /** NATS server URL(s). */
  nats: string | string[];
  /** Accepted bootstrap tokens (from --token-file, one per line). */
  tokens: string[];
  /** Unique per hub process; shows in the lease and the status API. */
  identity: string;
  /** KV stream replicas: 1 on a single NATS server, 3 on a NATS cluster. */
  replicas: number;
  /** Hub leader lease TTL and renew period. */
  leaseTtlMs: number;
  leaseRenewMs: number;
  health: HealthThresholds;
  /** Changes arriving within this window are planned together. */
  debounceMs: number;
  /** A shard's proxy fences itself after this long without NATS; a handover waits at most this long for an ack. */
  proxyLeaseSeconds: number;
  /** Completed handovers kept per operator in the status API. */
  handoverHistory: number;
  /** HTTP listen address of /healthz, /readyz, /metrics and /status; port 0 picks a free one. */
  listen: { host: string; port: number };
}

export const HUB_DEFAULTS = {
  replicas: 1,
  leaseTtlMs: 6_000,
  leaseRenewMs: 2_000,
  health: { unknownAfterMs: 15_000, offlineAfterMs: 45_000 },
  debounceMs: 200,
  proxyLeaseSeconds: 15,
  handoverHistory: 50,
  listen: { host: '127.0.0.1', port: 9464 },
} as const satisfies Partial<HubOptions>;

/** Problems a user can fix, one sentence each naming the option; empty when the options are usable. */
export function hubOptionProblems(options: HubOptions): string[] {
  const problems: string[] = [];
  if (options.tokens.length === 0) problems.push('no bootstrap token: the token file must hold at least one non-empty line');
  if (options.leaseRenewMs * 2 > options.leaseTtlMs) problems.push('the lease renew period must be at most half the lease TTL');
  if (options.health.offlineAfterMs <= options.health.unknownAfterMs) problems.push('offline-after must be longer than unknown-after');
  return problems;
}
