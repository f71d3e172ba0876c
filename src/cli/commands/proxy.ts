import { unwatchFile, watchFile } from 'node:fs';
import { UsageError } from '../../errors.js';
import { createRegistry } from '../../metrics/index.js';
import {
  FileRouteSource,
  TableStore,
  createApiGuard,
  loadCredentials,
  loadRules,
  startEgressProxy,
  startProxy,
  type ListenAddress,
  type ProxyConfig,
  type RuleSet,
} from '../../proxy/index.js';
import { intValue, requiredString, stringList, stringValue, type Command, type CommandContext } from '../command.js';

function listenAddress(ctx: CommandContext, name: string, fallback: string): ListenAddress {
  const raw = stringValue(ctx, name) ?? fallback;
  const colon = raw.lastIndexOf(':');
  const port = Number(raw.slice(colon + 1));
  if (colon <= 0 || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new UsageError(`--${name} must be HOST:PORT (e.g. 127.0.0.1:5443), not "${raw}"`);
  }
  return { host: raw.slice(0, colon).replace(/^\[|\]$/g, ''), port };
}

function proxyConfig(ctx: CommandContext): ProxyConfig {
  return Object.freeze({
    api: listenAddress(ctx, 'listen', '127.0.0.1:5443'),
    ops: listenAddress(ctx, 'ops-listen', '127.0.0.1:5441'),
    upstream: {
      headersTimeoutMs: intValue(ctx, 'upstream-timeout-ms', 30_000, { min: 100, max: 600_000 }),
    },
    breaker: {
      errorThresholdPercentage: intValue(ctx, 'breaker-error-percent', 50, { min: 1, max: 100 }),
      volumeThreshold: intValue(ctx, 'breaker-volume', 5, { min: 1, max: 10_000 }),
      resetTimeoutMs: intValue(ctx, 'breaker-reset-ms', 5_000, { min: 100, max: 600_000 }),
      rollingCountTimeoutMs: intValue(ctx, 'breaker-window-ms', 10_000, { min: 1_000, max: 600_000 }),
    },
  });
}

export const proxyCommand: Command = {
  name: 'proxy',
  summary: 'Run the sidecar proxy: route by cluster, enforce the shard, break circuits, limit, inject faults.',
  usage: '--route-table FILE --credentials KUBECONFIG [--store FILE] [--listen HOST:PORT] [--rules FILE]...',
  details:
    'Route tables come from --route-table (re-read when it changes); the last applied one is kept in --store and\n' +
    'served from there when the source is unavailable at start. --credentials is a kubeconfig whose context names\n' +
    'are the cluster names of the route table (client certificates or tokens; servers and CAs come from the table).\n' +
    '/healthz, /readyz and /metrics are on --ops-listen. With --egress-listen, external REST calls sent through\n' +
    'that HTTP proxy (HTTP_PROXY/HTTPS_PROXY) are judged by the CircuitBreaker and FaultInjection rules of --rules.',
  options: {
    'route-table': { type: 'string', valueName: 'FILE', description: 'route table JSON (as the hub publishes it)' },
    credentials: { type: 'string', valueName: 'FILE', description: 'kubeconfig with one context per cluster name' },
    store: { type: 'string', valueName: 'FILE', description: 'where the last applied table is kept (default .ctrlmesh/proxy-route-table.json)' },
    listen: { type: 'string', valueName: 'HOST:PORT', description: 'API listener for the operator (default 127.0.0.1:5443)' },
    'ops-listen': { type: 'string', valueName: 'HOST:PORT', description: '/healthz /readyz /metrics (default 127.0.0.1:5441)' },
    'egress-listen': { type: 'string', valueName: 'HOST:PORT', description: 'HTTP proxy for external REST calls (off unless given)' },
    rules: { type: 'string', multiple: true, valueName: 'FILE', description: 'CircuitBreaker / FaultInjection manifests (repeatable; re-read on change)' },
    'upstream-timeout-ms': { type: 'string', valueName: 'MS', description: 'longest wait for an API server response head (default 30000)' },
    'breaker-error-percent': { type: 'string', valueName: 'P', description: 'failure percentage that opens a cluster breaker (default 50)' },
    'breaker-volume': { type: 'string', valueName: 'N', description: 'requests in the window before it can open (default 5)' },
    'breaker-reset-ms': { type: 'string', valueName: 'MS', description: 'open time before a half-open probe (default 5000)' },
    'breaker-window-ms': { type: 'string', valueName: 'MS', description: 'rolling window of the failure statistics (default 10000)' },
  },
  run: async (ctx) => {
    const config = proxyConfig(ctx);
    const routeTable = requiredString(ctx, 'route-table');
    const credentials = loadCredentials(requiredString(ctx, 'credentials'));
    const ruleFiles = stringList(ctx, 'rules');
    const egress = stringValue(ctx, 'egress-listen') === undefined ? undefined : listenAddress(ctx, 'egress-listen', '');
    const { logger } = ctx;
    let rules: RuleSet = await loadRules(ruleFiles, Date.now());
    const currentRules = (): RuleSet => rules;
    const clock = { now: Date.now, random: Math.random };
    const registry = createRegistry('proxy');
    const proxy = await startProxy({
      config,
      source: new FileRouteSource({ path: routeTable, logger }),
      store: new TableStore(stringValue(ctx, 'store') ?? '.ctrlmesh/proxy-route-table.json'),
      credentials,
      registry,
      logger,
      now: Date.now,
      ...(ruleFiles.length > 0 ? { guard: (metrics) => createApiGuard({ rules: currentRules, clock, metrics }) } : {}),
    });
    const egressProxy = egress ? await startEgressProxy({ listen: egress, rules: currentRules, clock, metrics: proxy.metrics, logger }) : undefined;
    if (egressProxy) logger.info({ url: egressProxy.url }, 'egress HTTP proxy listening: set HTTP_PROXY/HTTPS_PROXY of the operator to it');
    const reload = (): void => {
      loadRules(ruleFiles, Date.now()).then(
        (next) => {
          rules = next;
          logger.info({ files: ruleFiles }, 'rules reloaded');
        },
        (err: unknown) => logger.error({ err }, 'rules changed but cannot be used; keeping the current rules'),
      );
    };
    for (const file of ruleFiles) watchFile(file, { interval: 500 }, reload);
    ctx.stdout.write(`proxy listening on ${proxy.apiUrl} (ops ${proxy.opsUrl}${egressProxy ? `, egress ${egressProxy.url}` : ''})\n`);
    await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
    for (const file of ruleFiles) unwatchFile(file, reload);
    await egressProxy?.close();
    await proxy.close();
    logger.info('proxy stopped');
    return 0;
  },
};
