import type { NatsClientConfig } from '../transport/index.js';
import type { HealthThresholds } from './health.js';
import type { BootstrapToken } from './registration.js';

export interface HubOptions {
  nats: NatsClientConfig;
  /** Accepted bootstrap tokens, each bound to one cluster (from --token-file, `CLUSTER TOKEN` per line). */
  tokens: BootstrapToken[];
  /** Seed of the hub's nkey, which signs every route table (proxies trust its public key). */
  signingSeed: string;
  /**
   * Mints each registering agent a user JWT for its cluster alone: the seed of the account's signing key and the
   * account's public key. Absent, agents stay on the identity they connected with.
   */
  agentIssuer?: { seed: string; account: string };
  /** Unique per hub process; shows in the lease and the status API. */
  identity: string;
  /**
   * KV stream replicas of the buckets the hub creates: 1 on a single NATS server, 3 on a NATS cluster; `auto`
   * (default) takes the most the cluster can place, up to 3. Existing buckets keep theirs.
   */
  replicas: number | 'auto';
  /** Hub leader lease TTL and renew period. */
  leaseTtlMs: number;
  leaseRenewMs: number;
  health: HealthThresholds;
  /** Changes arriving within this window are planned together. */
  debounceMs: number;
  /** A shard's proxy fences itself this long after its last lease extension; a handover waits this long for an ack. */
  proxyLeaseSeconds: number;
  /** Added to the proxy lease before a revoked unit is granted without acknowledgement (clock-rate safety). */
  grantMarginMs: number;
  /** Completed handovers kept per operator in the status API. */
  handoverHistory: number;
  /** HTTP listen address of /healthz, /readyz, /metrics and /status; port 0 picks a free one. */
  listen: { host: string; port: number };
}

export const HUB_DEFAULTS = {
  replicas: 'auto',
  leaseTtlMs: 6_000,
  leaseRenewMs: 2_000,
  health: { unknownAfterMs: 15_000, offlineAfterMs: 45_000 },
  debounceMs: 200,
  proxyLeaseSeconds: 15,
  grantMarginMs: 2_000,
  handoverHistory: 50,
  listen: { host: '127.0.0.1', port: 9464 },
} as const satisfies Partial<HubOptions>;

/** Problems a user can fix, one sentence each naming the option; empty when the options are usable. */
export function hubOptionProblems(options: HubOptions): string[] {
  const problems: string[] = [];
  if (options.tokens.length === 0) problems.push('no bootstrap token: the token file must hold at least one "CLUSTER TOKEN" line');
  if (options.leaseRenewMs * 2 > options.leaseTtlMs) problems.push('the lease renew period must be at most half the lease TTL');
  if (options.health.offlineAfterMs <= options.health.unknownAfterMs) problems.push('offline-after must be longer than unknown-after');
  return problems;
}
