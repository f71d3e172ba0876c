import { natsConfigFromFlags, natsOptions, routeSignerKeys } from './nats-flags.js';
import { formatDuration, type ListenAddress } from '../../api/index.js';
import { UsageError } from '../../errors.js';
import {
  FileRouteSource,
  NatsRouteSource,
  PROXY_DEFAULTS,
  PROXY_WEBHOOK_DEFAULTS,
  ProxyConfigSchema,
  TableStore,
  createKubeconfigWriter,
  liveRulesFromFiles,
  loadCredentials,
  parseProxyConfig,
  startProxy,
  systemLeaseClock,
  type LeaseClock,
  type ProxyConfig,
  type RouteSource,
  type RunningProxy,
} from '../../proxy/index.js';
import type { RouteTable } from '../../transport/index.js';
import { durationValue, intValue, requiredString, stringList, stringValue, usableOptions, type Command, type CommandContext } from '../command.js';
import { parseListen } from './flags.js';

const hostPort = (address: ListenAddress): string => `${address.host}:${address.port}`;

function listenAddress(ctx: CommandContext, name: string, fallback: ListenAddress): ListenAddress {
  const value = stringValue(ctx, name);
  return value === undefined ? fallback : parseListen(name, value);
}

/** The webhook listener, with --webhook-port (and --webhook-cert-dir); the other webhook flags need them. */
function webhookConfig(ctx: CommandContext): ProxyConfig['webhook'] {
  const port = stringValue(ctx, 'webhook-port');
  const certDir = stringValue(ctx, 'webhook-cert-dir');
  if (port === undefined) {
    const stray = ['webhook-cert-dir', 'webhook-listen', 'webhook-timeout'].filter((f) => stringValue(ctx, f) !== undefined);
    if (stray.length > 0) throw new UsageError(`${stray.map((f) => `--${f}`).join(', ')} need --webhook-port (the operator's webhook port)`);
    return undefined;
  }
  if (certDir === undefined || certDir === '') throw new UsageError('--webhook-port needs --webhook-cert-dir (where tls.crt and tls.key are)');
  const field = ProxyConfigSchema.properties.webhook;
  return {
    listen: listenAddress(ctx, 'webhook-listen', PROXY_WEBHOOK_DEFAULTS.listen),
    operatorPort: intValue(ctx, 'webhook-port', 0, field.properties.operatorPort),
    certDir,
    timeoutMs: durationValue(ctx, 'webhook-timeout', PROXY_WEBHOOK_DEFAULTS.timeoutMs, field.properties.timeoutMs),
  };
}

function proxyConfig(ctx: CommandContext, listeners: Pick<ProxyConfig, 'api' | 'ops'>): ProxyConfig {
  const field = ProxyConfigSchema.properties;
  const breaker = field.breaker.properties;
  const egress = stringValue(ctx, 'egress-listen');
  const webhook = webhookConfig(ctx);
  return usableOptions(
    parseProxyConfig({
      api: listenAddress(ctx, 'listen', listeners.api),
      ops: listenAddress(ctx, 'ops-listen', listeners.ops),
      ...(egress === undefined ? {} : { egress: parseListen('egress-listen', egress) }),
      upstream: {
        headersTimeoutMs: durationValue(ctx, 'upstream-timeout', PROXY_DEFAULTS.upstream.headersTimeoutMs, field.upstream.properties.headersTimeoutMs),
      },
      breaker: {
        errorThresholdPercentage: intValue(ctx, 'breaker-error-percent', PROXY_DEFAULTS.breaker.errorThresholdPercentage, breaker.errorThresholdPercentage),
        volumeThreshold: intValue(ctx, 'breaker-volume', PROXY_DEFAULTS.breaker.volumeThreshold, breaker.volumeThreshold),
        resetTimeoutMs: durationValue(ctx, 'breaker-reset', PROXY_DEFAULTS.breaker.resetTimeoutMs, breaker.resetTimeoutMs),
        rollingCountTimeoutMs: durationValue(ctx, 'breaker-window', PROXY_DEFAULTS.breaker.rollingCountTimeoutMs, breaker.rollingCountTimeoutMs),
      },
      requests: {
        maxBodyBytes: intValue(ctx, 'max-body-bytes', PROXY_DEFAULTS.requests.maxBodyBytes, field.requests.properties.maxBodyBytes),
        allowImpersonation: ctx.values['allow-impersonation'] === true,
        readTimeoutMs: durationValue(ctx, 'request-read-timeout', PROXY_DEFAULTS.requests.readTimeoutMs, field.requests.properties.readTimeoutMs),
      },
      lease: { marginMs: durationValue(ctx, 'lease-margin', PROXY_DEFAULTS.lease.marginMs, field.lease.properties.marginMs) },
      meshSecret: stringValue(ctx, 'mesh-secret') ?? PROXY_DEFAULTS.meshSecret,
      ...(webhook ? { webhook } : {}),
    }),
  );
}

/** The route source the flags name: a file (static tables) or the hub's NATS KV bucket (live, leased). */
function routeSource(ctx: CommandContext, leaseClock: LeaseClock): RouteSource {
  const file = stringValue(ctx, 'route-table');
  const nats = natsConfigFromFlags(ctx);
  if ((file === undefined) === (nats === undefined)) throw new UsageError('give either --route-table FILE or --nats URL (with --operator and --shard)');
  if (file !== undefined) return new FileRouteSource({ path: file, logger: ctx.logger });
  if (nats === undefined) throw new UsageError('--nats is required without --route-table');
  const from = stringValue(ctx, 'pod-name') ?? ctx.env.POD_NAME;
  return new NatsRouteSource({
    nats,
    monotonic: leaseClock.monotonic,
    trusted: routeSigners(ctx),
    operator: requiredString(ctx, 'operator'),
    shard: requiredString(ctx, 'shard'),
    logger: ctx.logger,
    ...(from ? { from } : {}),
  });
}

/** The hubs' route-signing public keys (--route-signer, or CTRLMESH_ROUTE_SIGNERS comma-separated); at least one. */
function routeSigners(ctx: CommandContext): string[] {
  const keys = routeSignerKeys(ctx, 'route-signer', 'CTRLMESH_ROUTE_SIGNERS');
  if (keys.length === 0) throw new UsageError('--route-signer is required with --nats: the public key of the hub\'s --signing-key (N...)');
  return keys;
}

/**
 * Starts the proxy the flags describe (listening where `listeners` says unless --listen / --ops-listen say otherwise,
 * its table kept in --store, else `storePath`),
 * keeping the operator's kubeconfig at `kubeconfigPath` if given. The kubeconfig names the port the proxy really
 * listens on (`--listen 127.0.0.1:0` included): a table installed before the listener is up is written once it is.
 */
export async function startProxyFromFlags(
  ctx: CommandContext,
  options: { listeners: Pick<ProxyConfig, 'api' | 'ops'>; kubeconfigPath: string | undefined; storePath?: string },
): Promise<RunningProxy> {
  const config = proxyConfig(ctx, options.listeners);
  // One monotonic clock for the source's `askedAt` and the controller's lease: the wall clock judges no lease.
  const leaseClock = systemLeaseClock();
  const source = routeSource(ctx, leaseClock);
  const credentials = loadCredentials(requiredString(ctx, 'credentials'));
  const { logger } = ctx;
  const podLabels = stringValue(ctx, 'pod-labels');
  const { kubeconfigPath } = options;
  let writeKubeconfig: ((table: RouteTable) => void) | undefined;
  let installedEarly: RouteTable | undefined;
  const proxy = await startProxy({
    config,
    source,
    store: new TableStore(stringValue(ctx, 'store') ?? options.storePath ?? '.ctrlmesh/proxy-route-table.json', logger),
    credentials,
    logger,
    now: Date.now,
    leaseClock,
    // --rules files and the route table's cluster rules (those selecting this pod), merged.
    rules: liveRulesFromFiles({ rules: stringList(ctx, 'rules'), ...(podLabels === undefined ? {} : { podLabels }), logger, now: Date.now }),
    ...(kubeconfigPath === undefined ? {} : { onTableInstalled: (table: RouteTable) => (writeKubeconfig ? writeKubeconfig(table) : (installedEarly = table)) }),
  });
  if (kubeconfigPath !== undefined) {
    writeKubeconfig = createKubeconfigWriter({ path: kubeconfigPath, proxyUrl: proxy.apiUrl, logger });
    const table = proxy.controller.current?.table ?? installedEarly;
    if (table) writeKubeconfig(table);
  }
  return proxy;
}

export const PROXY_OPTIONS: Command['options'] = {
  'route-table': { type: 'string', valueName: 'FILE', description: 'route table JSON (as the hub publishes it)' },
  ...natsOptions,
  'route-signer': { type: 'string', multiple: true, valueName: 'KEY', description: "with --nats: public key of the hub's route-table signing key (repeatable) [$CTRLMESH_ROUTE_SIGNERS]" },
  operator: { type: 'string', valueName: 'NS/NAME', description: 'with --nats: the operator (its root or hand-written ShardingConfig)' },
  shard: { type: 'string', valueName: 'NAME', description: 'with --nats: this proxy\'s shard' },
  'pod-name': { type: 'string', valueName: 'NAME', description: 'with --nats: name in acknowledgements (default $POD_NAME)' },
  credentials: { type: 'string', valueName: 'FILE', description: 'kubeconfig with one context per cluster name' },
  store: { type: 'string', valueName: 'FILE', description: 'where the last applied table is kept (default .ctrlmesh/proxy-route-table.json)' },
  listen: { type: 'string', valueName: 'HOST:PORT', description: `API listener for the operator (default ${hostPort(PROXY_DEFAULTS.api)})` },
  'ops-listen': { type: 'string', valueName: 'HOST:PORT', description: `/healthz /readyz /metrics (default ${hostPort(PROXY_DEFAULTS.ops)})` },
  'egress-listen': { type: 'string', valueName: 'HOST:PORT', description: 'HTTP proxy for external REST calls (off unless given)' },
  'write-kubeconfig': { type: 'string', valueName: 'FILE', description: "keep the operator's kubeconfig here (a context per cluster of the table)" },
  rules: { type: 'string', multiple: true, valueName: 'FILE', description: 'CircuitBreaker / FaultInjection manifests (repeatable; re-read on change)' },
  'pod-labels': {
    type: 'string',
    valueName: 'FILE',
    description: "the pod's labels (downward API metadata.labels; re-read on change): which of the table's cluster rules select it",
  },
  'upstream-timeout': {
    type: 'string',
    valueName: 'DURATION',
    description: `longest wait for an API server response head (default ${formatDuration(PROXY_DEFAULTS.upstream.headersTimeoutMs)})`,
  },
  'breaker-error-percent': { type: 'string', valueName: 'P', description: `failure percentage that opens a cluster breaker (default ${PROXY_DEFAULTS.breaker.errorThresholdPercentage})` },
  'breaker-volume': { type: 'string', valueName: 'N', description: `requests in the window before it can open (default ${PROXY_DEFAULTS.breaker.volumeThreshold})` },
  'breaker-reset': { type: 'string', valueName: 'DURATION', description: `open time before a half-open probe (default ${formatDuration(PROXY_DEFAULTS.breaker.resetTimeoutMs)})` },
  'breaker-window': {
    type: 'string',
    valueName: 'DURATION',
    description: `rolling window of the failure statistics (default ${formatDuration(PROXY_DEFAULTS.breaker.rollingCountTimeoutMs)})`,
  },
  'max-body-bytes': {
    type: 'string',
    valueName: 'N',
    description: `largest body the proxy reads to judge a request (locks, Namespace creates; default ${PROXY_DEFAULTS.requests.maxBodyBytes})`,
  },
  'request-read-timeout': {
    type: 'string',
    valueName: 'DURATION',
    description: `how long a client may take to send a whole request, head and body, before 408 (default ${formatDuration(PROXY_DEFAULTS.requests.readTimeoutMs)})`,
  },
  'mesh-secret': {
    type: 'string',
    valueName: 'NAME',
    description: `the operator namespace's Secrets holding the mesh's credentials: NAME and NAME.<cluster>.<shard>; no shard reaches them (default ${PROXY_DEFAULTS.meshSecret})`,
  },
  'allow-impersonation': { type: 'boolean', description: "pass the operator's Impersonate-* headers (acting with the proxy's identity's impersonate rights)" },
  'lease-margin': { type: 'string', valueName: 'DURATION', description: `with --nats: fence this long before the lease ends (default ${formatDuration(PROXY_DEFAULTS.lease.marginMs)})` },
  'webhook-port': { type: 'string', valueName: 'PORT', description: "the operator's admission webhook port: serve it and send each review to the owning shard" },
  'webhook-cert-dir': { type: 'string', valueName: 'DIR', description: "with --webhook-port: the webhook's tls.crt, tls.key and optional ca.crt (reloaded on change)" },
  'webhook-listen': {
    type: 'string',
    valueName: 'HOST:PORT',
    description: `with --webhook-port: where the API server reaches the webhook (default ${hostPort(PROXY_WEBHOOK_DEFAULTS.listen)})`,
  },
  'webhook-timeout': {
    type: 'string',
    valueName: 'DURATION',
    description: `with --webhook-port: how long the owning shard has to answer before 503 (default ${formatDuration(PROXY_WEBHOOK_DEFAULTS.timeoutMs)})`,
  },
};

export const proxyCommand: Command = {
  name: 'proxy',
  summary: 'Run the sidecar proxy: route by cluster, enforce the shard, break circuits, limit, inject faults.',
  usage: '(--route-table FILE | --nats URL --operator NS/NAME --shard NAME) --credentials KUBECONFIG [--store FILE] [--rules FILE]... [--pod-labels FILE]',
  details:
    'Route tables come from --route-table (re-read when it changes) or from the hub through NATS (--nats, acknowledged\n' +
    'there; only tables signed by a --route-signer key are applied). The last applied table is kept in --store and served from there\n' +
    'when the source is unavailable at start; out of contact with NATS for longer than the table\'s lease, the proxy\n' +
    'fences itself (serves no bucket; /readyz says so). --credentials is a kubeconfig whose context names\n' +
    'are the cluster names of the route table (client certificates or tokens; servers and CAs come from the table).\n' +
    '/healthz, /readyz and /metrics are on --ops-listen. With --egress-listen, external REST calls sent through\n' +
    'that HTTP proxy (HTTP_PROXY/HTTPS_PROXY) are judged by the CircuitBreaker and FaultInjection rules in force:\n' +
    'those of --rules and the route table\'s cluster rules whose selector matches the pod\'s labels (--pod-labels; without\n' +
    'it only cluster rules without a selector); a --rules rule replaces a cluster rule of the same kind and name.\n' +
    "With --webhook-port, the operator's admission webhook is served on --webhook-listen and each review is sent to\n" +
    'the shard owning its namespace, or answered 503 when none can answer (docs/webhooks.md).',
  options: PROXY_OPTIONS,
  run: async (ctx) => {
    const proxy = await startProxyFromFlags(ctx, { listeners: PROXY_DEFAULTS, kubeconfigPath: stringValue(ctx, 'write-kubeconfig') });
    const webhook = proxy.webhook ? `, webhook ${proxy.webhook.url ?? 'waiting for its certificate'}` : '';
    ctx.stdout.write(`proxy listening on ${proxy.apiUrl} (ops ${proxy.opsUrl}${proxy.egressUrl ? `, egress ${proxy.egressUrl}` : ''}${webhook})\n`);
    // A signal that came while the proxy was starting has already fired: do not wait for another.
    if (!ctx.signal.aborted) await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
    await proxy.close();
    ctx.logger.info('proxy stopped');
    return 0;
  },
};
