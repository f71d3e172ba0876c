/**
 * The command line of the sidecar proxy (`ctrlmesh proxy`) following its shard's route table in the hub's NATS KV,
 * built from a typed object: the agent's injector (src/agent/sidecar-webhook.ts) and the demo (src/demo) start
 * proxies with it, so the flags are written in one place. Pure: no I/O, no knowledge of where the files are.
 */

/** The proxy's API port (what the operator talks to): the sidecar's, and the default of `--listen`. */
export const PROXY_API_PORT = 5443;
/** The proxy's /healthz, /readyz and /metrics port: the sidecar's (Prometheus scrapes the pod here), and the default of `--ops-listen`. */
export const PROXY_OPS_PORT = 5441;

export interface ProxyCommandOptions {
  /** NATS server URLs, one `--nats` each. */
  nats: readonly string[];
  /** CA file of the NATS server certificate (`--nats-ca`): NATS over TLS, verified. */
  natsCa?: string;
  /** The shard's NATS creds file (`--nats-creds`). */
  natsCreds?: string;
  /** Public keys (N...) of the hubs' route-table signing keys (`--route-signer`, one each). */
  routeSigners: readonly string[];
  /** The operator, `<namespace>/<root or hand-written ShardingConfig>` (`--operator`). */
  operator: string;
  /** The shard, `<cluster>/<shard>` (`--shard`). */
  shard: string;
  /** API listener for the operator, `HOST:PORT` (`--listen`). */
  listen?: string;
  /** /healthz /readyz /metrics listener, `HOST:PORT` (`--ops-listen`). */
  opsListen?: string;
  /** Where the last applied table is kept (`--store`). */
  store?: string;
  /** Where the operator's kubeconfig is kept (`--write-kubeconfig`). */
  writeKubeconfig?: string;
  /** Kubeconfig with one context per cluster name (`--credentials`). */
  credentials: string;
  /** HTTP proxy for the operator's external REST calls, `HOST:PORT` (`--egress-listen`). */
  egressListen?: string;
  /** CircuitBreaker / FaultInjection manifests (`--rules`, one each). */
  rules?: readonly string[];
}

/** `['proxy', '--nats=…', …]`: the subcommand and its flags, in `--flag=value` form, for `ctrlmesh` (or its image). */
export function proxyCommandArgs(options: ProxyCommandOptions): string[] {
  const flag = (name: string, value: string | undefined): string[] => (value === undefined ? [] : [`--${name}=${value}`]);
  return [
    'proxy',
    ...options.nats.map((url) => `--nats=${url}`),
    ...flag('nats-ca', options.natsCa),
    ...flag('nats-creds', options.natsCreds),
    ...options.routeSigners.map((key) => `--route-signer=${key}`),
    `--operator=${options.operator}`,
    `--shard=${options.shard}`,
    ...flag('listen', options.listen),
    ...flag('ops-listen', options.opsListen),
    ...flag('store', options.store),
    ...flag('write-kubeconfig', options.writeKubeconfig),
    `--credentials=${options.credentials}`,
    ...flag('egress-listen', options.egressListen),
    ...(options.rules ?? []).map((file) => `--rules=${file}`),
  ];
}
