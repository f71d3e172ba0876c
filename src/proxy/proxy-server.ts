import replyFrom from '@fastify/reply-from';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Logger } from 'pino';
import { createProxyMetrics, createRegistry, registerOpsRoutes, showRulesInForce, type ProxyMetrics } from '../metrics/index.js';
import { requestTimeoutChecks, useLeanAsyncBind } from '../runtime/index.js';
import type { RouteTable } from '../transport/index.js';
import { startEgressProxy, type EgressProxy } from './egress/egress-proxy.js';
import { createApiGuard } from './request/judgement/rules-guard.js';
import { apiErrorHandler, createApiHandler } from './request/entry/api-handler.js';
import { answerClientError, answerConnect, answerExpectation } from './request/entry/refused-early.js';
import { countAnswers } from './request/entry/pipelined.js';
import { createUpgradeHandler } from './request/entry/upgrade.js';
import { createWatchPath } from './request/entry/watch-path.js';
import type { LeaseClock } from './routes/lease-clock.js';
import { RouteController } from './routes/route-controller.js';
import type { RouteSource } from './routes/route-source.js';
import type { TableStore } from './routes/table-store.js';
import { emptyRules, type RuleClock, type RuleSet, type RuleSource } from './rules/index.js';
import { ClusterLinks, type ClusterCredentials } from './upstream/index.js';
import { startWebhookServer, type WebhookServer } from './webhook/webhook-server.js';
import type { ProxyConfig } from './options.js';

export interface ProxyDeps {
  /** Validated and frozen by parseProxyConfig (src/proxy/options.ts). */
  config: ProxyConfig;
  source: RouteSource;
  store: TableStore;
  credentials: ReadonlyMap<string, ClusterCredentials>;
  /** Where the proxy's metrics are registered and served from (/metrics); default a registry of its own. */
  registry?: Registry;
  logger: Logger;
  /** Wall time: rules, metrics and what people read; never a lease. */
  now: () => number;
  /** What the lease is judged by (default CLOCK_MONOTONIC and this boot): the NATS source must read the same clock. */
  leaseClock?: LeaseClock;
  /** The random source of fault injection; default Math.random. */
  random?: () => number;
  /**
   * CircuitBreaker and FaultInjection rules: with a source, API calls are judged by them before enforcement, and so
   * are the egress port's calls (which, without one, pass). A source of cluster rules (LiveRules) is told of each
   * table installed and names the rules in force in the table's acknowledgement.
   */
  rules?: RuleSource;
  /** Told of every route table installed. */
  onTableInstalled?: (table: RouteTable) => void;
}

export interface RunningProxy {
  /** http://host:port of the API listener. */
  apiUrl: string;
  opsUrl: string;
  /** http://host:port of the egress HTTP proxy, when `config.egress` asked for one. */
  egressUrl: string | undefined;
  /** The admission webhook listener, when `config.webhook` asked for one (its URL once the certificate is read). */
  webhook: WebhookServer | undefined;
  controller: RouteController;
  close(): Promise<void>;
}

/**
 * The API listener's accept queue. A route change that ends every watch makes the operator open them all again at
 * once; past Node's default of 511 the kernel drops the connects and each client waits a second or more to retry.
 * Linux caps it at net.core.somaxconn (4096 by default), the queue Go's servers (kubectl proxy) always ask for.
 */
const API_LISTEN_BACKLOG = 65_535;

/** How long the API listener keeps an idle client connection: fastify's default for the servers it makes. */
const API_KEEP_ALIVE_MS = 72_000;

function urlOf(app: FastifyInstance): string {
  const address = app.server.address() as AddressInfo;
  return `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`;
}

/**
 * Starts the sidecar proxy: rules from `rules` (first, so unusable rules fail before anything listens), route tables
 * from `source`, the API listener, the ops listener and, when configured, the egress HTTP proxy. It owns its metrics.
 */
export async function startProxy(deps: ProxyDeps): Promise<RunningProxy> {
  // Every sharded watch is an HTTP/2 stream, and Node 20-24 spend a third of a stream's opening on a deprecated accessor.
  useLeanAsyncBind();
  const registry = deps.registry ?? createRegistry('proxy');
  let rules: RuleSet = emptyRules(deps.now());
  // Once serving: the metrics show the rules in force, and the controller acknowledges its table again when the
  // cluster rules in force from it change.
  const hooks: RuleHooks = {};
  await deps.rules?.start({
    onRules: (next) => {
      rules = next;
      if (hooks.metrics) showRulesInForce(hooks.metrics, next.inForce);
    },
    onApplied: () => hooks.controller?.reacknowledge(),
  });
  try {
    return await serve(deps, registry, () => rules, hooks);
  } catch (err) {
    await deps.rules?.stop();
    throw err;
  }
}

/** What the rule source's handlers reach once the proxy serves. */
interface RuleHooks {
  metrics?: ProxyMetrics;
  controller?: RouteController;
}

async function serve(deps: ProxyDeps, registry: Registry, currentRules: () => RuleSet, hooks: RuleHooks): Promise<RunningProxy> {
  const { config, logger } = deps;
  const metrics = createProxyMetrics(registry);
  hooks.metrics = metrics;
  showRulesInForce(metrics, currentRules().inForce);
  const clock: RuleClock = { now: deps.now, random: deps.random ?? Math.random };
  const guard = deps.rules ? createApiGuard({ rules: currentRules, clock, metrics }) : undefined;
  const links = new ClusterLinks({ credentials: deps.credentials, upstream: config.upstream, breaker: config.breaker, metrics, logger });
  const controller = new RouteController({
    source: deps.source,
    store: deps.store,
    links,
    metrics,
    logger,
    now: deps.now,
    ...(deps.leaseClock === undefined ? {} : { leaseClock: deps.leaseClock }),
    leaseMarginMs: deps.config.lease.marginMs,
    meshSecret: config.meshSecret,
    onInstalled: (table) => {
      // The table's cluster rules are in force before it is acknowledged.
      deps.rules?.tableInstalled?.(table);
      deps.onTableInstalled?.(table);
    },
    appliedRules: (table) => deps.rules?.appliedRules?.(table) ?? [],
  });
  hooks.controller = controller;
  await controller.start();

  // A log line per request would cost more than the proxying; requests are counted in the metrics instead.
  const quiet = (): LogController => new LogController({ disableRequestLogging: true });
  const breakerRetryAfterSeconds = Math.max(1, Math.ceil(config.breaker.resetTimeoutMs / 1000));
  // Sharded watches on HTTP/2 connections take the watch path; every other request goes on to fastify's route.
  const watchPath = createWatchPath({ controller, logger, headers: config.requests, breakerRetryAfterSeconds, guard });
  const api = Fastify({
    loggerInstance: logger.child({ listener: 'api' }) as FastifyBaseLogger,
    logController: quiet(),
    // Nor a child logger per request (a watch would keep its own for as long as it lasts): the proxy's are enough.
    childLoggerFactory: (parent) => parent,
    forceCloseConnections: true,
    // The handler reads the query from the request target itself, as the API server will (parseApiRequest): the
    // router's own parse of it, on every request, would go unread.
    routerOptions: { querystringParser: () => ({}) },
    // A path the router cannot decode (a bad %-escape) is refused before any route, as a Status too.
    frameworkErrors: apiErrorHandler(logger),
    clientErrorHandler: answerClientError,
    serverFactory: (route) => {
      // A client that never finishes its request (a body the proxy reads to judge, held back) is cut off, not waited for.
      const server = createServer({ ...requestTimeoutChecks(config.requests.readTimeoutMs), requestTimeout: config.requests.readTimeoutMs }, (req, res) =>
        watchPath(req, res, route),
      );
      // Fastify's own servers keep an idle connection this long (its default), longer than clients' usual 30-60 s.
      server.keepAliveTimeout = API_KEEP_ALIVE_MS;
      return server;
    },
  });
  api.server.on('checkExpectation', answerExpectation);
  api.server.on('connect', answerConnect);
  // Bodies stream to the API server as they come; only lock objects are read (to rename them).
  api.removeAllContentTypeParsers();
  api.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
  await api.register(replyFrom, { undici: links.dispatcher, disableRequestLogging: true });
  const handler = createApiHandler({
    controller,
    logger,
    breakerRetryAfterSeconds,
    requests: config.requests,
    ...(guard ? { guard } : {}),
  });
  api.setErrorHandler(apiErrorHandler(logger));
  api.all('/*', handler);
  api.all('/', handler);
  // Methods the router has no route for (PROPFIND, LOCK, ...) reach the same judgement, which refuses them (405).
  api.setNotFoundHandler(handler);
  countAnswers(api.server);
  const upgrades = createUpgradeHandler({ controller, logger, headers: config.requests, timeoutMs: config.upstream.headersTimeoutMs, breakerRetryAfterSeconds, guard });
  api.server.on('upgrade', upgrades);

  const ops = Fastify({ loggerInstance: logger.child({ listener: 'ops' }) as FastifyBaseLogger, logController: quiet(), forceCloseConnections: true });
  registerOpsRoutes(ops, { registry, readiness: () => controller.readiness() });

  // Fastify writes into the options it is given: a copy each, the configuration is frozen.
  await api.listen({ ...config.api, backlog: API_LISTEN_BACKLOG });
  await ops.listen({ ...config.ops });
  const apiUrl = urlOf(api);
  const opsUrl = urlOf(ops);
  logger.info({ api: apiUrl, ops: opsUrl, source: deps.source.description }, 'proxy listening');
  let egress: EgressProxy | undefined;
  if (config.egress) {
    egress = await startEgressProxy({ listen: config.egress, rules: currentRules, clock, metrics, logger });
    logger.info({ url: egress.url }, 'egress HTTP proxy listening: set HTTP_PROXY/HTTPS_PROXY of the operator to it');
  }
  const webhook = config.webhook
    ? await startWebhookServer({ ...config.webhook, listen: { ...config.webhook.listen }, state: () => controller.current, metrics, logger: logger.child({ listener: 'webhook' }) })
    : undefined;
  return {
    apiUrl,
    opsUrl,
    egressUrl: egress?.url,
    webhook,
    controller,
    close: async () => {
      await deps.rules?.stop();
      await egress?.close();
      await webhook?.close();
      await controller.stop();
      upgrades.closeAll();
      await Promise.all([api.close(), ops.close()]);
      await links.close();
    },
  };
}
