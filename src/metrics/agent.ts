import { Counter, Gauge, type Registry } from 'prom-client';

/** The agent's own metrics. */
export interface AgentMetrics {
  natsConnected: Gauge;
  apiServerSynced: Gauge;
  reportsSent: Counter;
  labelPatches: Counter<'kind'>;
  labellingRemaining: Gauge;
  admissionReviews: Counter<'patched'>;
  shardSelectors: Gauge;
}

export function createAgentMetrics(registry: Registry): AgentMetrics {
  const registers = [registry];
  return {
    natsConnected: new Gauge({ name: 'ctrlmesh_agent_nats_connected', help: '1 while connected to NATS.', registers }),
    apiServerSynced: new Gauge({ name: 'ctrlmesh_agent_apiserver_synced', help: '1 while every informer is listing and watching.', registers }),
    reportsSent: new Counter({ name: 'ctrlmesh_agent_reports_sent_total', help: 'Cluster reports published to the hub.', registers }),
    labelPatches: new Counter({
      name: 'ctrlmesh_agent_label_patches_total',
      help: 'Objects labelled by the labelling pass, by kind.',
      labelNames: ['kind'],
      registers,
    }),
    labellingRemaining: new Gauge({ name: 'ctrlmesh_agent_labelling_remaining', help: 'Objects still to label in the current pass.', registers }),
    admissionReviews: new Counter({
      name: 'ctrlmesh_agent_admission_reviews_total',
      help: 'Admission reviews answered, by whether labels were added.',
      labelNames: ['patched'],
      registers,
    }),
    shardSelectors: new Gauge({
      name: 'ctrlmesh_agent_shard_selectors',
      help: '1 while the API server filters lists and watches by shard selector (KEP-5866), as last probed; 0 until a probe has answered.',
      registers,
    }),
  };
}
