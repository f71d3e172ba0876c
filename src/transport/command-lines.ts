/**
 * The command lines of the hub (`ctrlmesh hub`) and the agent (`ctrlmesh agent`), built from typed objects, and the
 * flag writing they share with the proxy's (proxy-command.ts): whoever starts these processes (the demo, the
 * benchmarks, the tests) writes the flags through here, durations as durations. Pure: no I/O.
 */
import { formatDuration } from '../api/index.js';

/** `--name=value`, or nothing when the value is absent. */
export function flagArg(name: string, value: string | number | undefined): string[] {
  return value === undefined ? [] : [`--${name}=${value}`];
}

/** A duration flag from milliseconds: `--name=1m30s`, or nothing when absent. */
export function durationArg(name: string, ms: number | undefined): string[] {
  return flagArg(name, ms === undefined ? undefined : formatDuration(ms));
}

/** `--name=value` for each value of a repeatable flag. */
export function listArg(name: string, values: readonly string[] | undefined): string[] {
  return (values ?? []).map((value) => `--${name}=${value}`);
}

/** How the hub, the agent and the proxy reach NATS on their command lines. */
export interface NatsCommandOptions {
  /** NATS server URLs, one `--nats` each. */
  nats: readonly string[];
  /** CA file of the NATS server certificate (`--nats-ca`): NATS over TLS, verified. */
  natsCa?: string;
  /** The process's NATS creds file (`--nats-creds`). */
  natsCreds?: string;
}

export function natsArgs(options: NatsCommandOptions): string[] {
  return [...listArg('nats', options.nats), ...flagArg('nats-ca', options.natsCa), ...flagArg('nats-creds', options.natsCreds)];
}

export interface HubCommandOptions extends NatsCommandOptions {
  /** Bootstrap tokens, one `CLUSTER TOKEN` line each (`--token-file`). */
  tokenFile: string;
  /** The nkey seed that signs route tables (`--signing-key`). */
  signingKey: string;
  /** The account signing key seed that mints agents' identities (`--agent-issuer`). */
  agentIssuer?: string;
  /** KV replicas of new buckets (`--replicas`). */
  replicas?: number | 'auto';
  /** Status API, `HOST:PORT` (`--listen`). */
  listen?: string;
  identity?: string;
  /** The hub leader lease (`--lease-ttl`). */
  leaseTtlMs?: number;
  /** Heartbeat silence before a cluster is Unknown (`--unknown-after`), and Offline (`--offline-after`). */
  unknownAfterMs?: number;
  offlineAfterMs?: number;
  /** How long a proxy serves after its last lease extension, whole seconds (`--proxy-lease`). */
  proxyLeaseSeconds?: number;
  /** Added to the proxy lease before a unit moves without acknowledgement (`--grant-margin`). */
  grantMarginMs?: number;
}

/** `['hub', '--nats=…', …]`: the subcommand and its flags, in `--flag=value` form, for `ctrlmesh` (or its image). */
export function hubCommandArgs(options: HubCommandOptions): string[] {
  return [
    'hub',
    ...natsArgs(options),
    `--token-file=${options.tokenFile}`,
    `--signing-key=${options.signingKey}`,
    ...flagArg('agent-issuer', options.agentIssuer),
    ...flagArg('replicas', options.replicas),
    ...flagArg('listen', options.listen),
    ...flagArg('identity', options.identity),
    ...durationArg('lease-ttl', options.leaseTtlMs),
    ...durationArg('unknown-after', options.unknownAfterMs),
    ...durationArg('offline-after', options.offlineAfterMs),
    ...durationArg('proxy-lease', options.proxyLeaseSeconds === undefined ? undefined : options.proxyLeaseSeconds * 1000),
    ...durationArg('grant-margin', options.grantMarginMs),
  ];
}

export interface AgentCommandOptions extends NatsCommandOptions {
  /** The cluster's name in the registry (`--cluster`). */
  cluster: string;
  /** Its admin kubeconfig (`--kubeconfig`; absent, the pod's service account). */
  kubeconfig?: string;
  /** This cluster's bootstrap token (`--token-file`). */
  tokenFile: string;
  /** Registry labels (`--label KEY=VALUE`, one each). */
  labels?: Readonly<Record<string, string>>;
  hashAlgorithm?: string;
  /** The API server URL proxies should use (`--advertise-server`). */
  advertiseServer?: string;
  /** /healthz /readyz /metrics, `HOST:PORT` (`--listen`). */
  listen?: string;
  /** The admission webhook's address, `HOST:PORT` (`--webhook-listen`), and where the API server calls it. */
  webhookListen?: string;
  webhookUrl?: string;
  webhookService?: string;
  /** The webhook's serving certificate, key and CA (`--webhook-cert`, `--webhook-key`, `--webhook-ca`). */
  webhookCert?: string;
  webhookKey?: string;
  webhookCa?: string;
  /** The injected proxy: its image, the route-signing keys it trusts, the Secret it mounts. */
  proxyImage?: string;
  proxyRouteSigners?: readonly string[];
  proxySecret?: string;
  labelQps?: number;
}

/** `['agent', '--cluster=…', …]`: the subcommand and its flags, in `--flag=value` form, for `ctrlmesh` (or its image). */
export function agentCommandArgs(options: AgentCommandOptions): string[] {
  return [
    'agent',
    `--cluster=${options.cluster}`,
    ...flagArg('kubeconfig', options.kubeconfig),
    ...natsArgs(options),
    `--token-file=${options.tokenFile}`,
    ...listArg(
      'label',
      Object.entries(options.labels ?? {}).map(([key, value]) => `${key}=${value}`),
    ),
    ...flagArg('hash-algorithm', options.hashAlgorithm),
    ...flagArg('advertise-server', options.advertiseServer),
    ...flagArg('listen', options.listen),
    ...flagArg('webhook-listen', options.webhookListen),
    ...flagArg('webhook-url', options.webhookUrl),
    ...flagArg('webhook-service', options.webhookService),
    ...flagArg('webhook-cert', options.webhookCert),
    ...flagArg('webhook-key', options.webhookKey),
    ...flagArg('webhook-ca', options.webhookCa),
    ...flagArg('proxy-image', options.proxyImage),
    ...listArg('proxy-route-signer', options.proxyRouteSigners),
    ...flagArg('proxy-secret', options.proxySecret),
    ...flagArg('label-qps', options.labelQps),
  ];
}
