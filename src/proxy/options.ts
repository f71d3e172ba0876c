import { Type, type Static } from '@sinclair/typebox';
import { checkOptions, ListenAddressSchema, Millis, type ListenAddress, type OptionsResult } from '../api/index.js';
import { PROXY_API_PORT, PROXY_OPS_PORT, PROXY_WEBHOOK_PORT } from '../transport/proxy-command.js';
import { DEFAULT_MAX_BODY_BYTES } from './request/parse/index.js';
import { DEFAULT_MESH_SECRET } from './routes/mesh-objects.js';

const strict = { additionalProperties: false } as const;

/**
 * The proxy's configuration (what `ctrlmesh proxy` takes as flags), the one definition of its shape and ranges;
 * `parseProxyConfig` checks and freezes it. The route source, the store, credentials and rules are not data: they
 * are the proxy's other dependencies (src/proxy/proxy-server.ts).
 */
export const ProxyConfigSchema = Type.Object(
  {
    /** Where the operator's kubeconfig points (API traffic; `--listen`). */
    api: ListenAddressSchema,
    /** /healthz, /readyz, /metrics: a port of their own so the API server's own paths pass through untouched (`--ops-listen`). */
    ops: ListenAddressSchema,
    /** The HTTP proxy for the operator's external REST calls (HTTP_PROXY/HTTPS_PROXY), judged by the rules; off when absent. */
    egress: Type.Optional(ListenAddressSchema),
    upstream: Type.Object(
      {
        /** Longest wait for an API server's response head; a longer wait counts against the cluster's breaker (`--upstream-timeout`). */
        headersTimeoutMs: Millis(100, 600_000),
      },
      strict,
    ),
    /** The per-cluster breaker (src/proxy/upstream/cluster-breaker.ts). */
    breaker: Type.Object(
      {
        /** Failure percentage within the rolling window that opens the breaker (`--breaker-error-percent`). */
        errorThresholdPercentage: Type.Integer({ minimum: 1, maximum: 100 }),
        /** Requests within the window before the percentage counts (`--breaker-volume`). */
        volumeThreshold: Type.Integer({ minimum: 1, maximum: 10_000 }),
        /** Time open before one half-open probe is let through (`--breaker-reset`). */
        resetTimeoutMs: Millis(100, 600_000),
        /** The rolling window of the failure statistics (`--breaker-window`). */
        rollingCountTimeoutMs: Millis(1_000, 600_000),
      },
      strict,
    ),
    /**
     * Body limit for what the proxy reads (`--max-body-bytes`), whether `Impersonate-*` headers pass
     * (`--allow-impersonation`), and how long a client has to send a whole request, head and body (`--request-read-timeout`).
     */
    requests: Type.Object(
      { maxBodyBytes: Type.Integer({ minimum: 1024, maximum: 64 * 1024 * 1024 }), allowImpersonation: Type.Boolean(), readTimeoutMs: Millis(1_000, 3_600_000) },
      strict,
    ),
    /**
     * The name of the operator namespace's Secrets that hold the mesh's credentials (`--mesh-secret`): the Secret of
     * that name and every `<name>.<cluster>.<shard>` one. No shard reads, watches or writes them through the proxy,
     * and lists never show them (docs/proxy.md, "The operator's namespace").
     */
    meshSecret: Type.String({ minLength: 1, maxLength: 253, pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$' }),
    /** The proxy fences itself `marginMs` before its lease ends (the hub waits its own margin past it; `--lease-margin`). */
    lease: Type.Object({ marginMs: Millis(0, 600_000) }, strict),
    /** The operator's admission webhook, served here and sent to the owning shard (src/proxy/webhook); off when absent. */
    webhook: Type.Optional(
      Type.Object(
        {
          /** Where the API server reaches the proxy (`--webhook-listen`). */
          listen: ListenAddressSchema,
          /** The operator's own webhook port, on 127.0.0.1 and on every shard's pod IP (`--webhook-port`). */
          operatorPort: Type.Integer({ minimum: 1, maximum: 65535 }),
          /** `tls.crt`, `tls.key` and optionally `ca.crt`, as controller-runtime reads them (`--webhook-cert-dir`). */
          certDir: Type.String({ minLength: 1 }),
          /** How long the owner has to answer before the review gets 503, under the API server's 10 s default (`--webhook-timeout`). */
          timeoutMs: Millis(100, 60_000),
        },
        strict,
      ),
    ),
  },
  strict,
);

export type ProxyConfig = Static<typeof ProxyConfigSchema>;

export const PROXY_DEFAULTS = {
  api: { host: '127.0.0.1', port: PROXY_API_PORT },
  ops: { host: '127.0.0.1', port: PROXY_OPS_PORT },
  upstream: { headersTimeoutMs: 30_000 },
  breaker: { errorThresholdPercentage: 50, volumeThreshold: 5, resetTimeoutMs: 5_000, rollingCountTimeoutMs: 10_000 },
  /** A request still arriving after a minute (kube-apiserver's own --request-timeout) is cut off: 408. */
  requests: { maxBodyBytes: DEFAULT_MAX_BODY_BYTES, allowImpersonation: false, readTimeoutMs: 60_000 },
  /** Covers clock-rate differences between proxy and hub over one lease, with the hub's own grant margin. */
  lease: { marginMs: 2_000 },
  meshSecret: DEFAULT_MESH_SECRET,
} as const satisfies ProxyConfig;

/** The webhook's defaults: the listener every pod's proxy has, and a timeout under the API server's 10 s default. */
export const PROXY_WEBHOOK_DEFAULTS = { listen: { host: '0.0.0.0', port: PROXY_WEBHOOK_PORT }, timeoutMs: 8_000 } as const;

/** Whether two listen addresses take the same port: the same host, or a wildcard host (which binds every address). */
function sameSocket(a: ListenAddress, b: ListenAddress): boolean {
  const wildcard = (host: string): boolean => host === '0.0.0.0' || host === '::';
  return a.port === b.port && (a.host === b.host || wildcard(a.host) || wildcard(b.host));
}

/**
 * Listeners that would collide: two of api, ops, egress and webhook on one fixed port of one host (a wildcard host
 * takes the port on every address), or the operator's webhook port on one of the proxy's (they share the pod's network).
 */
export function proxyConfigProblems(config: ProxyConfig): string[] {
  const listeners: [string, ListenAddress | undefined][] = [
    ['listen', config.api],
    ['ops-listen', config.ops],
    ['egress-listen', config.egress],
    ['webhook-listen', config.webhook?.listen],
  ];
  const seen: [string, ListenAddress][] = [];
  const problems: string[] = [];
  for (const [name, address] of listeners) {
    if (!address || address.port === 0) continue;
    const other = seen.find(([, taken]) => sameSocket(taken, address));
    if (other) problems.push(`${name} and ${other[0]} must not both be ${address.host}:${address.port}`);
    else seen.push([name, address]);
  }
  const operatorPort = config.webhook?.operatorPort;
  const taken = seen.find(([, address]) => address.port === operatorPort);
  if (taken) problems.push(`webhook-port ${operatorPort} is the proxy's own ${taken[0]} port: the operator's webhook must listen on another`);
  return problems;
}

/** The proxy's configuration checked once (schema, then proxyConfigProblems) and deeply frozen, or every problem found. */
export function parseProxyConfig(input: unknown): OptionsResult<ProxyConfig> {
  return checkOptions(ProxyConfigSchema, input, proxyConfigProblems);
}
