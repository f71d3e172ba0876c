import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** The hub's own metrics (names are part of the dashboards' contract). */
export interface HubMetrics {
  leader: Gauge;
  clusters: Gauge<'health'>;
  routeTablesPublished: Counter<'operator'>;
  handovers: Counter<'granted_by'>;
  pendingHandovers: Gauge;
  reconcileSeconds: Histogram;
  registrations: Counter<'result'>;
}

export function createHubMetrics(registry: Registry): HubMetrics {
  const registers = [registry];
  return {
    leader: new Gauge({ name: 'ctrlmesh_hub_leader', help: '1 while this hub holds the leader lease, else 0.', registers }),
    clusters: new Gauge({ name: 'ctrlmesh_hub_clusters', help: 'Registered clusters by health.', labelNames: ['health'], registers }),
    routeTablesPublished: new Counter({
      name: 'ctrlmesh_hub_route_tables_published_total',
      help: 'Route-table versions written to KV.',
      labelNames: ['operator'],
      registers,
    }),
    handovers: new Counter({
      name: 'ctrlmesh_hub_handovers_total',
      help: 'Units handed from one shard to another, by what allowed the grant (ack, lease-expiry, back-to-owner).',
      labelNames: ['granted_by'],
      registers,
    }),
    pendingHandovers: new Gauge({ name: 'ctrlmesh_hub_handovers_pending', help: 'Units revoked and not yet granted.', registers }),
    reconcileSeconds: new Histogram({
      name: 'ctrlmesh_hub_reconcile_duration_seconds',
      help: 'Time to plan and publish after a change.',
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    }),
    registrations: new Counter({
      name: 'ctrlmesh_hub_registrations_total',
      help: 'Registration requests by result (accepted, unchanged, refused).',
      labelNames: ['result'],
      registers,
    }),
  };
}
