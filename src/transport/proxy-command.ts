/**
 * The command line of the sidecar proxy (`ctrlmesh proxy`) following its shard's route table in the hub's NATS KV,
 * built from a typed object: the agent's injector (src/agent/sidecar-webhook.ts), the demo (src/demo) and the
 * tests start proxies with it, so the flags are written in one place (the hub's and the agent's: command-lines.ts).
 * Pure: no I/O, no knowledge of where the files are.
 */
import { durationArg, flagArg, listArg, natsArgs, type NatsCommandOptions } from './command-lines.js';

/** The proxy's API port (what the operator talks to): the sidecar's, and the default of `--listen`. */
export const PROXY_API_PORT = 5443;
/** The proxy's /healthz, /readyz and /metrics port: the sidecar's (Prometheus scrapes the pod here), and the default of `--ops-listen`. */
export const PROXY_OPS_PORT = 5441;
/**
 * The proxy's admission webhook port (`--webhook-listen`, all interfaces): a webhook operator's Service reaches the
 * proxy here, and the proxy sends each review to the shard that owns its object.
 */
export const PROXY_WEBHOOK_PORT = 5445;

export interface ProxyCommandOptions extends NatsCommandOptions {
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
  /** The name of the Secrets holding the mesh's credentials in the operator's namespace (`--mesh-secret`). */
  meshSecret?: string;
  /** HTTP proxy for the operator's external REST calls, `HOST:PORT` (`--egress-listen`). */
  egressListen?: string;
  /** CircuitBreaker / FaultInjection manifests (`--rules`, one each). */
  rules?: readonly string[];
  /** The pod's labels as the downward API writes them (`--pod-labels`): which cluster rules select this proxy. */
  podLabels?: string;
  /** The name in its acknowledgements (`--pod-name`; absent, $POD_NAME). */
  podName?: string;
  /** How long before its lease ends the proxy fences itself (`--lease-margin`). */
  leaseMarginMs?: number;
  /** The admission webhook listener, `HOST:PORT` (`--webhook-listen`; only with `webhookPort`). */
  webhookListen?: string;
  /** The operator's webhook port (`--webhook-port`): the proxy serves its webhook and routes each review. */
  webhookPort?: number;
  /** Where the operator's webhook certificate is, `tls.crt`, `tls.key` and optionally `ca.crt` (`--webhook-cert-dir`). */
  webhookCertDir?: string;
  /** How long the owning shard has to answer a review (`--webhook-timeout`). */
  webhookTimeoutMs?: number;
}

/** `['proxy', '--nats=…', …]`: the subcommand and its flags, in `--flag=value` form, for `ctrlmesh` (or its image). */
export function proxyCommandArgs(options: ProxyCommandOptions): string[] {
  return [
    'proxy',
    ...natsArgs(options),
    ...listArg('route-signer', options.routeSigners),
    `--operator=${options.operator}`,
    `--shard=${options.shard}`,
    ...flagArg('listen', options.listen),
    ...flagArg('ops-listen', options.opsListen),
    ...flagArg('store', options.store),
    ...flagArg('write-kubeconfig', options.writeKubeconfig),
    `--credentials=${options.credentials}`,
    ...flagArg('mesh-secret', options.meshSecret),
    ...flagArg('egress-listen', options.egressListen),
    ...listArg('rules', options.rules),
    ...flagArg('pod-labels', options.podLabels),
    ...flagArg('pod-name', options.podName),
    ...durationArg('lease-margin', options.leaseMarginMs),
    ...flagArg('webhook-listen', options.webhookListen),
    ...flagArg('webhook-port', options.webhookPort),
    ...flagArg('webhook-cert-dir', options.webhookCertDir),
    ...durationArg('webhook-timeout', options.webhookTimeoutMs),
  ];
}
