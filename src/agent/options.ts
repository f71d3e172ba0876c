import type { KubeConfig } from '@kubernetes/client-node';
import { labelKeyProblem, labelValueProblem } from '../api/index.js';
import type { HashSettingsInput } from '../sharding/index.js';
import type { NatsClientConfig } from '../transport/index.js';
import { DEFAULT_SKIPPED_NAMESPACES } from './labels.js';
import type { WebhookTarget, WebhookTls } from './webhook.js';

export interface AgentOptions {
  cluster: string;
  /** Labels recorded in the hub's registry (e.g. region), used by roots' cluster selectors. */
  clusterLabels: Record<string, string>;
  kc: KubeConfig;
  /** The bootstrap identity's connection: exchanged at registration for the cluster's own (src/agent/register.ts). */
  nats: NatsClientConfig;
  token: string;
  hash: HashSettingsInput;
  /** API server URL the proxies should use, when it differs from the kubeconfig's. */
  advertisedServer?: string;
  heartbeatMs: number;
  /**
   * How often the latest report is sent again although nothing changed. Reports are fire-and-forget, so one sent
   * while no hub leads (a lease hand-over) or while JetStream is still recovering (a NATS restart) is lost; the
   * repeat delivers it. The hub ignores a repeat that matches what it stored.
   */
  reportRepeatMs: number;
  debounceMs: number;
  skipNamespaces: readonly string[];
  labelQps: number;
  installCrds: boolean;
  /**
   * The admission webhook; omitted = no webhook (labels come from the labelling passes only). Without `tls` a CA
   * and serving certificate are minted in memory; without `target` the API server calls https://HOST:PORT/mutate.
   */
  webhook?: { tls?: WebhookTls; host: string; port: number; target?: WebhookTarget };
  /**
   * The proxy sidecar the webhook injects into labelled pods; omitted = no injection. `routeSigners` are the hub's
   * route-signing public keys; `secretName` the Secret, in each pod's namespace, with the proxy's credentials.
   */
  sidecar?: { image: string; routeSigners: readonly string[]; secretName: string };
  listen: { host: string; port: number };
}

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
  if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(options.cluster) || options.cluster.length > 63) {
    problems.push(`cluster "${options.cluster}" must be a lower-case DNS label (it names the cluster's subjects and shards)`);
  }
  if (options.token.trim() === '') problems.push('the bootstrap token is empty: the token file must hold this cluster\'s token');
  for (const [key, value] of Object.entries(options.clusterLabels)) {
    const problem = labelKeyProblem(key) ?? labelValueProblem(value);
    if (problem) problems.push(`label ${key}=${value}: ${problem}`);
  }
  if (options.advertisedServer !== undefined && !/^https:\/\/[^/]/.test(options.advertisedServer)) {
    problems.push(`advertise-server must be an https:// URL (proxies verify the API server), not "${options.advertisedServer}"`);
  }
  if (options.reportRepeatMs < options.heartbeatMs) problems.push('reports must not repeat more often than heartbeats');
  return problems;
}
