import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/**
 * The sidecar proxy's metrics: the names here are the ones the dashboards read. Labels are bounded: cluster
 * names, verbs, resource types, status codes and rule names, never object names.
 */
export interface ProxyMetrics {
  requests: Counter<'cluster' | 'verb' | 'resource' | 'code'>;
  requestDuration: Histogram<'cluster' | 'verb'>;
  openWatches: Gauge<'cluster'>;
  watchEventsFiltered: Counter<'cluster'>;
  listsFiltered: Counter<'cluster' | 'reason'>;
  watchesEnded: Counter<'cluster' | 'reason'>;
  breakerState: Gauge<'cluster'>;
  rateLimited: Counter<'rule'>;
  intercepted: Counter<'rule'>;
  faultsInjected: Counter<'rule' | 'fault'>;
  routeTableVersion: Gauge;
  routeTableAppliedAt: Gauge;
  natsConnected: Gauge;
  fenced: Gauge;
  rulesInForce: Gauge<'kind' | 'rule' | 'generation' | 'source'>;
  webhookRequests: Counter<'route' | 'owner'>;
  webhookDuration: Histogram<'route'>;
}

/** Breaker states as the gauge reports them. */
export const BREAKER_STATE_VALUE = { closed: 0, halfOpen: 1, open: 2 } as const;

export function createProxyMetrics(registry: Registry): ProxyMetrics {
  const registers = [registry];
  return {
    requests: new Counter({
      name: 'ctrlmesh_proxy_requests_total',
      help: 'API requests handled by the proxy, by target cluster, verb, resource type and HTTP status code.',
      labelNames: ['cluster', 'verb', 'resource', 'code'],
      registers,
    }),
    requestDuration: new Histogram({
      name: 'ctrlmesh_proxy_request_duration_seconds',
      help: 'Time from receiving a request to sending the response head (watches: until the stream starts).',
      labelNames: ['cluster', 'verb'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    openWatches: new Gauge({
      name: 'ctrlmesh_proxy_open_watches',
      help: 'Watch streams currently open through the proxy, by cluster.',
      labelNames: ['cluster'],
      registers,
    }),
    watchEventsFiltered: new Counter({
      name: 'ctrlmesh_proxy_watch_events_filtered_total',
      help: 'Watch events dropped or turned into bookmarks because their object is outside the shard.',
      labelNames: ['cluster'],
      registers,
    }),
    listsFiltered: new Counter({
      name: 'ctrlmesh_proxy_lists_filtered_total',
      help:
        'List answers the proxy read whole and filtered itself: reason "no-echo" when the API server did not confirm the ' +
        'shard selector sent (an older server, or its feature gate off), "unlabelled" where nothing is labelled by design.',
      labelNames: ['cluster', 'reason'],
      registers,
    }),
    watchesEnded: new Counter({
      name: 'ctrlmesh_proxy_watches_ended_total',
      help: 'Watches the proxy ended itself: revoked buckets or self-fencing.',
      labelNames: ['cluster', 'reason'],
      registers,
    }),
    breakerState: new Gauge({
      name: 'ctrlmesh_proxy_breaker_state',
      help: 'Circuit breaker state per cluster: 0 closed, 1 half-open, 2 open.',
      labelNames: ['cluster'],
      registers,
    }),
    rateLimited: new Counter({
      name: 'ctrlmesh_proxy_rate_limited_requests_total',
      help: 'Requests refused by a CircuitBreaker rate-limiting rule, by rule name.',
      labelNames: ['rule'],
      registers,
    }),
    intercepted: new Counter({
      name: 'ctrlmesh_proxy_intercepted_requests_total',
      help: 'External REST calls refused by a CircuitBreaker traffic-intercept rule, by rule name.',
      labelNames: ['rule'],
      registers,
    }),
    faultsInjected: new Counter({
      name: 'ctrlmesh_proxy_faults_injected_total',
      help: 'Faults injected by FaultInjection rules, by rule name and fault (delay or abort).',
      labelNames: ['rule', 'fault'],
      registers,
    }),
    routeTableVersion: new Gauge({
      name: 'ctrlmesh_proxy_route_table_version',
      help: 'Version of the route table the proxy enforces (0 before the first one).',
      registers,
    }),
    routeTableAppliedAt: new Gauge({
      name: 'ctrlmesh_proxy_route_table_applied_timestamp_seconds',
      help: 'Unix time the current route table was applied; its age is time() minus this.',
      registers,
    }),
    natsConnected: new Gauge({
      name: 'ctrlmesh_proxy_route_source_connected',
      help: 'Whether the live route-table source (NATS) is reachable: 1 yes, 0 no.',
      registers,
    }),
    fenced: new Gauge({
      name: 'ctrlmesh_proxy_fenced',
      help: 'Whether the proxy has fenced itself (lease expired without contact): 1 yes, 0 no.',
      registers,
    }),
    rulesInForce: new Gauge({
      name: 'ctrlmesh_proxy_rules_in_force',
      help: 'CircuitBreaker and FaultInjection rules in force on the proxy: 1 per rule, by kind, name, generation and source (cluster or file).',
      labelNames: ['kind', 'rule', 'generation', 'source'],
      registers,
    }),
    webhookRequests: new Counter({
      name: 'ctrlmesh_proxy_webhook_requests_total',
      help: 'Admission reviews the proxy received, by route (local, forwarded, unowned, failed) and owning shard.',
      labelNames: ['route', 'owner'],
      registers,
    }),
    webhookDuration: new Histogram({
      name: 'ctrlmesh_proxy_webhook_seconds',
      help: 'Time from an admission review read to its answer sent, by route.',
      labelNames: ['route'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
  };
}

/**
 * Shows the rules in force (called when they change, never per request): one child per rule, the children of the
 * rules gone removed.
 */
export function showRulesInForce(metrics: Pick<ProxyMetrics, 'rulesInForce'>, rules: readonly { kind: string; name: string; generation: number; source: string }[]): void {
  metrics.rulesInForce.reset();
  for (const rule of rules) metrics.rulesInForce.set({ kind: rule.kind, rule: rule.name, generation: String(rule.generation), source: rule.source }, 1);
}
