import replyFrom from '@fastify/reply-from';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Logger } from 'pino';
import { createProxyMetrics, registerOpsRoutes, type ProxyMetrics } from '../metrics/index.js';
import { createApiHandler, type RequestGuard, type RequestPolicy } from './api-handler.js';
import type { BreakerOptions } from './cluster-breaker.js';
import { ClusterLinks } from './cluster-links.js';
import { RouteController } from './route-controller.js';
import type { RouteSource } from './route-source.js';
import type { TableStore } from './table-store.js';
import type { RouteTable } from '../transport/index.js';
import { createUpgradeHandler } from './upgrade.js';
import type { ClusterCredentials, UpstreamOptions } from './upstream.js';

export interface ListenAddress {
  host: string;
  port: number;
}

/** The proxy's configuration, validated and frozen by the CLI. */
export interface ProxyConfig {
  /** Where the operator's kubeconfig points (API traffic). */
  api: ListenAddress;
  /** /healthz, /readyz, /metrics: a port of their own so the API server's own paths pass through untouched. */
  ops: ListenAddress;
  upstream: UpstreamOptions;
  breaker: BreakerOptions;
  /** Body limit for what the proxy reads, and whether `Impersonate-*` headers pass. */
  requests: RequestPolicy;
  /** The proxy fences itself `marginMs` before its lease ends (the hub waits its own margin past it). */
  lease: { marginMs: number };
}

export interface ProxyDeps {
  config: ProxyConfig;
  source: RouteSource;
  store: TableStore;
  credentials: ReadonlyMap<string, ClusterCredentials>;
  registry: Registry;
  logger: Logger;
  now: () => number;
  /** Rate limits and fault injection, when rules are configured. */
  guard?: (metrics: ProxyMetrics) => RequestGuard;
  /** Told of every route table installed. */
  onTableInstalled?: (table: RouteTable) => void;
}

export interface RunningProxy {
  /** http://host:port of the API listener. */
  apiUrl: string;
  opsUrl: string;
  controller: RouteController;
  metrics: ProxyMetrics;
  close(): Promise<void>;
}

function urlOf(app: FastifyInstance): string {
  const address = app.server.address() as AddressInfo;
  return `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
}

/** Starts the sidecar proxy: route tables from `source`, the API listener, the ops listener. */
export async function startProxy(deps: ProxyDeps): Promise<RunningProxy> {
  const { config, logger, registry } = deps;
  const metrics = createProxyMetrics(registry);
  const links = new ClusterLinks({ credentials: deps.credentials, upstream: config.upstream, breaker: config.breaker, metrics, logger });
  const controller = new RouteController({
    source: deps.source,
    store: deps.store,
    links,
    metrics,
    logger,
    now: deps.now,
    leaseMarginMs: deps.config.lease.marginMs,
    onInstalled: deps.onTableInstalled,
  });
  await controller.start();

  // A log line per request would cost more than the proxying; requests are counted in the metrics instead.
  const quiet = (): LogController => new LogController({ disableRequestLogging: true });
  const api = Fastify({ loggerInstance: logger.child({ listener: 'api' }) as FastifyBaseLogger, logController: quiet(), forceCloseConnections: true });
  // Bodies stream to the API server as they come; only lock objects are read (to rename them).
  api.removeAllContentTypeParsers();
  api.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
  await api.register(replyFrom, { undici: links.dispatcher, disableRequestLogging: true });
  const handler = createApiHandler({
    controller,
    logger,
    breakerRetryAfterSeconds: Math.max(1, Math.ceil(config.breaker.resetTimeoutMs / 1000)),
    requests: config.requests,
    ...(deps.guard ? { guard: deps.guard(metrics) } : {}),
  });
  api.all('/*', handler);
  api.all('/', handler);
  api.server.on('upgrade', createUpgradeHandler({ controller, logger, headers: config.requests }));

  const ops = Fastify({ loggerInstance: logger.child({ listener: 'ops' }) as FastifyBaseLogger, logController: quiet(), forceCloseConnections: true });
  registerOpsRoutes(ops, { registry, readiness: () => controller.readiness() });

  await api.listen(config.api);
  await ops.listen(config.ops);
  const running: RunningProxy = {
    apiUrl: urlOf(api),
    opsUrl: urlOf(ops),
    controller,
    metrics,
    close: async () => {
      await controller.stop();
      await Promise.all([api.close(), ops.close()]);
      await links.close();
    },
  };
  logger.info({ api: running.apiUrl, ops: running.opsUrl, source: deps.source.description }, 'proxy listening');
  return running;
}
