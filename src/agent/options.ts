import { Type, type Static } from '@sinclair/typebox';
import {
  checkOptions,
  clusterNameProblem,
  labelKeyProblem,
  labelValueProblem,
  ListenAddressSchema,
  Millis,
  ObjectName,
  ReadonlyList,
  type OptionsResult,
} from '../api/index.js';
import { HashOptionsSchema, hashOptionsProblem } from '../sharding/index.js';
import { NatsClientConfigSchema } from '../transport/index.js';
import { DEFAULT_SKIPPED_NAMESPACES } from './labels.js';

const text = Type.String({ minLength: 1 });
const strict = { additionalProperties: false } as const;

/** The agent's options, the one definition of their shape and ranges; `parseAgentOptions` checks and freezes them. */
export const AgentOptionsSchema = Type.Object(
  {
    cluster: Type.String(),
    /** Labels recorded in the hub's registry (e.g. region), used by roots' cluster selectors. */
    clusterLabels: Type.Record(Type.String(), Type.String()),
    /** The bootstrap identity's connection: exchanged at registration for the cluster's own (src/agent/register.ts). */
    nats: NatsClientConfigSchema,
    token: Type.String(),
    hash: HashOptionsSchema,
    /** API server URL the proxies should use, when it differs from the kubeconfig's. */
    advertisedServer: Type.Optional(Type.String()),
    heartbeatMs: Millis(100, 600_000),
    /**
     * How often the latest report is sent again although nothing changed. Reports are fire-and-forget, so one sent
     * while no hub leads (a lease hand-over) or while JetStream is still recovering (a NATS restart) is lost; the
     * repeat delivers it. The hub ignores a repeat that matches what it stored.
     */
    reportRepeatMs: Millis(100, 3_600_000),
    /** Under a steady stream of changes, at most one sync per this long (a burst of a few runs at once). */
    debounceMs: Millis(0, 60_000),
    skipNamespaces: ReadonlyList(Type.String()),
    labelQps: Type.Integer({ minimum: 1, maximum: 10_000 }),
    installCrds: Type.Boolean(),
    /**
     * The admission webhook; omitted = no webhook (labels come from the labelling passes only). Without `tls` a CA
     * and serving certificate are minted in memory; without `target` the API server calls https://HOST:PORT/mutate.
     */
    webhook: Type.Optional(
      Type.Object(
        {
          tls: Type.Optional(Type.Object({ certPem: text, keyPem: text, caPem: text }, strict)),
          host: text,
          port: Type.Integer({ minimum: 0, maximum: 65535 }),
          target: Type.Optional(
            Type.Union([
              Type.Object({ url: text }, strict),
              Type.Object({ service: Type.Object({ namespace: text, name: text, port: Type.Integer({ minimum: 1, maximum: 65535 }) }, strict) }, strict),
            ]),
          ),
        },
        strict,
      ),
    ),
    /**
     * The proxy sidecar the webhook injects into labelled pods; omitted = no injection. `routeSigners` are the hub's
     * route-signing public keys; `secretName` names the proxies' Secrets in each pod's namespace, one per shard
     * (`<secretName>.<cluster>.<shard>`), and the proxy keeps every shard away from them (its `--mesh-secret`).
     */
    sidecar: Type.Optional(
      Type.Object(
        {
          image: text,
          routeSigners: ReadonlyList(Type.String({ pattern: '^N[A-Z2-7]{55}$' }), { minItems: 1 }),
          secretName: ObjectName(),
        },
        strict,
      ),
    ),
    listen: ListenAddressSchema,
  },
  strict,
);

export type AgentOptions = Static<typeof AgentOptionsSchema>;

export const AGENT_DEFAULTS = {
  heartbeatMs: 2_000,
  reportRepeatMs: 30_000,
  debounceMs: 200,
  skipNamespaces: DEFAULT_SKIPPED_NAMESPACES,
  labelQps: 50,
  installCrds: true,
  listen: { host: '127.0.0.1', port: 9465 },
} as const satisfies Partial<AgentOptions>;

/** Problems a user can fix, one sentence each naming the option; empty when the options are usable. */
export function agentOptionProblems(options: AgentOptions): string[] {
  const problems: string[] = [];
  const clusterProblem = clusterNameProblem(options.cluster);
  if (clusterProblem) problems.push(clusterProblem);
  if (options.token.trim() === '') problems.push('the bootstrap token is empty: the token file must hold this cluster\'s token');
  for (const [key, value] of Object.entries(options.clusterLabels)) {
    const problem = labelKeyProblem(key) ?? labelValueProblem(value);
    if (problem) problems.push(`label ${key}=${value}: ${problem}`);
  }
  if (options.advertisedServer !== undefined && !/^https:\/\/[^/]/.test(options.advertisedServer)) {
    problems.push(`advertise-server must be an https:// URL (proxies verify the API server), not "${options.advertisedServer}"`);
  }
  const hash = hashOptionsProblem(options.hash);
  if (hash !== undefined) problems.push(hash);
  if (options.reportRepeatMs < options.heartbeatMs) problems.push('reports must not repeat more often than heartbeats');
  if (options.sidecar && !options.webhook) problems.push('proxy-image needs the webhook (webhook-listen): the injected proxy comes with it');
  // A shard's Secret is `<secretName>.<cluster>.<shard>`, at most 253 characters: leave room for a shard's name.
  if (options.sidecar && options.sidecar.secretName.length + options.cluster.length + 3 > 253) {
    problems.push(`proxy-secret ${options.sidecar.secretName} and cluster ${options.cluster} leave no room for a shard in its Secret's name (<proxy-secret>.<cluster>.<shard>, at most 253 characters)`);
  }
  return problems;
}

/** The agent's options checked once (schema, then agentOptionProblems) and deeply frozen, or every problem found. */
export function parseAgentOptions(input: unknown): OptionsResult<AgentOptions> {
  return checkOptions(AgentOptionsSchema, input, agentOptionProblems);
}
