import { Type, type Static } from '@sinclair/typebox';
import { checkOptions, clusterNameProblem, labelKeyProblem, labelValueProblem, ListenAddressSchema, Millis, ReadonlyList, type OptionsResult } from '../api/index.js';
import { HashOptionsSchema, hashOptionsProblem } from '../sharding/index.js';
import { NatsClientConfigSchema } from '../transport/index.js';

/** An nkey seed of one kind: `SN` a server key (signs route tables), `SA` an account key (mints user JWTs). */
const seed = (prefix: 'SN' | 'SA') => Type.String({ pattern: `^${prefix}[A-Z2-7]{56}$` });

/** The hub's options, the one definition of their shape and ranges; `parseHubOptions` checks and freezes them. */
export const HubOptionsSchema = Type.Object(
  {
    nats: NatsClientConfigSchema,
    /**
     * Accepted bootstrap tokens, each bound to one cluster (from --token-file, `CLUSTER TOKEN [KEY=VALUE,...]` per
     * line); labels given there are the cluster's, whatever its agent says.
     */
    tokens: ReadonlyList(
      Type.Object(
        { cluster: Type.String({ minLength: 1 }), token: Type.String({ minLength: 1 }), labels: Type.Optional(Type.Record(Type.String(), Type.String())) },
        { additionalProperties: false },
      ),
    ),
    /**
     * Which clusters may define and span each operator (from --operator-file, `NAMESPACE/NAME CLUSTER,...` per line).
     * Given, a cluster's ShardingConfig counts only for an operator listed with that cluster, an operator spans only
     * its listed clusters, and an operator not listed is not planned. Absent, any member cluster may define or join
     * any operator by naming it.
     */
    operators: Type.Optional(
      ReadonlyList(
        Type.Object(
          {
            operator: Type.String({ minLength: 3 }),
            clusters: ReadonlyList(Type.String({ minLength: 1 }), { minItems: 1 }),
          },
          { additionalProperties: false },
        ),
      ),
    ),
    /** Seed of the hub's nkey, which signs every route table (proxies trust its public key). */
    signingSeed: seed('SN'),
    /**
     * Mints each registering agent a user JWT for its cluster alone: the seed of the account's signing key and the
     * account's public key. Absent, agents stay on the identity they connected with.
     */
    agentIssuer: Type.Optional(Type.Object({ seed: seed('SA'), account: Type.String({ pattern: '^A[A-Z2-7]{55}$' }) }, { additionalProperties: false })),
    /**
     * How long an identity minted for an agent is valid (`--agent-identity-ttl`). The agent renews it halfway, so a
     * removed cluster's identity (its renewal is refused), or one copied from it, stops working within this time.
     */
    agentIdentityTtlMs: Millis(2_000, 366 * 86_400_000),
    /**
     * The fleet's hash settings (`--hash-algorithm`): tables carry them, and a report whose agent labels otherwise is
     * dropped. Absent, the first reporting cluster's by name count, which lets any member cluster set them for all.
     */
    hash: Type.Optional(HashOptionsSchema),
    /** Unique per hub process; shows in the lease and the status API. */
    identity: Type.String({ minLength: 1, maxLength: 253 }),
    /**
     * KV stream replicas of the buckets the hub creates: 1 on a single NATS server, 3 on a NATS cluster; `auto`
     * (default) takes the most the cluster can place, up to 3. Existing buckets keep theirs.
     */
    replicas: Type.Union([Type.Integer({ minimum: 1, maximum: 5 }), Type.Literal('auto')]),
    /** Hub leader lease TTL (`--lease-ttl`) and renew period. */
    leaseTtlMs: Millis(2_000, 600_000),
    leaseRenewMs: Millis(100, 300_000),
    health: Type.Object(
      {
        /** Without a heartbeat for this long a cluster is Unknown (`--unknown-after`). */
        unknownAfterMs: Millis(1_000, 3_600_000),
        /** Without a heartbeat for this long a cluster is Offline (`--offline-after`, longer than unknownAfterMs). */
        offlineAfterMs: Millis(2_000, 86_400_000),
      },
      { additionalProperties: false },
    ),
    /**
     * Shards whose home cluster is Offline lose their units to the operator's shards elsewhere, through the usual
     * handover (`--move-units-of-offline-clusters`; a multicluster operator's failover). Off by default: a cluster
     * that flaps moves nothing, and a shard that cannot be reached keeps what it owns until its cluster is back.
     */
    moveUnitsOfOfflineClusters: Type.Boolean(),
    /** Under a steady stream of changes, at most one planning pass per this long (a burst of a few runs at once). */
    debounceMs: Millis(0, 60_000),
    /**
     * A shard's proxy fences itself this long after its last lease extension; a handover waits this long for an ack
     * (`--proxy-lease`, whole seconds: route tables carry it in seconds).
     */
    proxyLeaseSeconds: Type.Integer({ minimum: 1, maximum: 3_600 }),
    /** Added to the proxy lease before a revoked unit is granted without acknowledgement (clock-rate safety; `--grant-margin`). */
    grantMarginMs: Millis(0, 600_000),
    /** Completed handovers kept per operator in the status API. */
    handoverHistory: Type.Integer({ minimum: 0, maximum: 100_000 }),
    /** HTTP listen address of /healthz, /readyz and /metrics (and /status without statusListen); port 0 picks a free one. */
    listen: ListenAddressSchema,
    /**
     * A listener of its own for /status (`--status-listen`): the fleet's clusters, their API server URLs and every
     * operator's shards. Absent, /status is served on `listen`, which hubOptionProblems then allows on a loopback
     * address only, unless statusToken is given.
     */
    statusListen: Type.Optional(ListenAddressSchema),
    /** The bearer token /status requires (`--status-token-file`); needed where /status listens beyond loopback. */
    statusToken: Type.Optional(Type.String({ minLength: 16, maxLength: 4096, pattern: '^[\\x21-\\x7e]+$' })),
  },
  { additionalProperties: false },
);

export type HubOptions = Static<typeof HubOptionsSchema>;
/** The operator file's lines: the clusters each listed operator may come from and span. */
export type OperatorClusters = NonNullable<HubOptions['operators']>;

export const HUB_DEFAULTS = {
  replicas: 'auto',
  leaseTtlMs: 6_000,
  leaseRenewMs: 2_000,
  health: { unknownAfterMs: 15_000, offlineAfterMs: 45_000 },
  debounceMs: 200,
  moveUnitsOfOfflineClusters: false,
  proxyLeaseSeconds: 15,
  grantMarginMs: 2_000,
  agentIdentityTtlMs: 86_400_000,
  handoverHistory: 50,
  listen: { host: '127.0.0.1', port: 9464 },
} as const satisfies Partial<HubOptions>;

/** Whether a listen host is this machine's loopback only: what another pod or machine cannot reach. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/u.test(host);
}

/** A namespace (DNS label) and a ShardingConfig's name (DNS subdomain), as an operator is named. */
const OPERATOR_NAME = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\/[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?$/u;

/** Problems a user can fix between fields, one sentence each naming the option; empty when the options are usable. */
export function hubOptionProblems(options: HubOptions): string[] {
  const problems: string[] = [];
  if (options.tokens.length === 0) problems.push('no bootstrap token: the token file must hold at least one "CLUSTER TOKEN" line');
  for (const { cluster, labels } of options.tokens) {
    const clusterProblem = clusterNameProblem(cluster);
    if (clusterProblem) problems.push(`token file: ${clusterProblem}`);
    for (const [key, value] of Object.entries(labels ?? {})) {
      const problem = labelKeyProblem(key) ?? labelValueProblem(value);
      if (problem) problems.push(`token file: cluster ${cluster}, label ${key}=${value}: ${problem}`);
    }
  }
  const listed = new Set<string>();
  const registrable = new Set(options.tokens.map((t) => t.cluster));
  for (const { operator, clusters } of options.operators ?? []) {
    // A misspelt cluster would leave the operator's configs there unplanned: every cluster registers with a token.
    for (const cluster of clusters) {
      if (!registrable.has(cluster)) problems.push(`operator file: ${operator} lists cluster ${cluster}, which has no line in the token file`);
    }
    if (!OPERATOR_NAME.test(operator)) problems.push(`operator file: "${operator}" is not the NAMESPACE/NAME of a ShardingConfig`);
    if (listed.has(operator)) problems.push(`operator file: ${operator} is listed twice; give it one line with all its clusters`);
    listed.add(operator);
  }
  if (options.leaseRenewMs * 2 > options.leaseTtlMs) problems.push('the lease renew period must be at most half the lease TTL');
  if (options.health.offlineAfterMs <= options.health.unknownAfterMs) problems.push('offline-after must be longer than unknown-after');
  // /status lists the fleet's API servers and operators: a loopback address (kubectl port-forward reaches it) or a token.
  const status = options.statusListen ?? options.listen;
  if (!isLoopbackHost(status.host) && options.statusToken === undefined) {
    problems.push(
      `/status would be served on ${status.host}:${status.port} to anyone who reaches it: ` +
        (options.statusListen ? 'give status-listen a loopback address' : 'give status-listen (e.g. 127.0.0.1:9465)') +
        ', or a status token file',
    );
  }
  const hash = options.hash === undefined ? undefined : hashOptionsProblem(options.hash);
  if (hash !== undefined) problems.push(hash);
  return problems;
}

/** The hub's options checked once (schema, then hubOptionProblems) and deeply frozen, or every problem found. */
export function parseHubOptions(input: unknown): OptionsResult<HubOptions> {
  return checkOptions(HubOptionsSchema, input, hubOptionProblems);
}
