import { describe, expect, it } from 'vitest';
import { renderDemoView, type ProxyScrape } from '../../../src/cli/commands/demo-view.js';
import { parseMetricsText } from '../../../src/demo/index.js';
import type { HubStatus } from '../../../src/hub/index.js';

const status: HubStatus = {
  identity: 'hub-1',
  leader: true,
  clusters: [
    { name: 'cluster-a', labels: {}, server: 'https://127.0.0.1:1', health: 'Ready', lastHeartbeat: null, registeredAt: '2026-01-01T00:00:00Z', reportedAt: null },
  ],
  removedClusters: [],
  operators: [
    {
      operator: 'operator-demo/demo-root',
      shards: [{ name: 'cluster-a/demo-1-normal', version: 3, acknowledgedVersion: null, homeCluster: 'cluster-a', buckets: { 'cluster-a': [0, 1, 2, 5], 'cluster-b': [7] } }],
      pending: [],
      history: [],
    },
  ],
};

function scrape(at: number, requestsA: number, breakerB: number): ProxyScrape {
  const text = [
    `ctrlmesh_proxy_requests_total{cluster="cluster-a",verb="list",code="200"} ${requestsA}`,
    `ctrlmesh_proxy_requests_total{cluster="cluster-b",verb="list",code="200"} 4`,
    'ctrlmesh_proxy_breaker_state{cluster="cluster-a"} 0',
    `ctrlmesh_proxy_breaker_state{cluster="cluster-b"} ${breakerB}`,
    'ctrlmesh_proxy_rate_limited_requests_total{rule="configmap-writes"} 3',
    'ctrlmesh_proxy_faults_injected_total{rule="slow",fault="delay"} 2',
    'ctrlmesh_proxy_faults_injected_total{rule="flaky",fault="abort"} 1',
    'ctrlmesh_proxy_route_table_version 3',
    'ctrlmesh_proxy_fenced 0',
  ].join('\n');
  return { shard: 'cluster-a/demo-1-normal', at, samples: parseMetricsText(text) };
}

describe('renderDemoView', () => {
  it('shows ownership from the hub and, per shard proxy, request rates, breakers, limits, faults and table version', () => {
    const view = renderDemoView({
      title: 'demo',
      clusters: ['cluster-a', 'cluster-b'],
      status,
      proxies: [{ now: scrape(3000, 30, 2), before: scrape(1000, 10, 0) }],
    });
    expect(view).toContain('cluster-a/demo-1-normal  3        -      cluster-a:0-2,5 cluster-b:7');
    const row = view.trimEnd().split('\n').at(-1)?.split(/\s{2,}/);
    expect(row).toEqual(['cluster-a/demo-1-normal', '10.0', 'closed', '0.0', 'open', '3', '3', '3']);
  });

  it('says so when the hub or a proxy does not answer', () => {
    const view = renderDemoView({ title: 'demo', clusters: ['cluster-a'], status: undefined, proxies: [{ now: { shard: 's', at: 1, samples: undefined }, before: undefined }] });
    expect(view).toContain('hub: not answering');
    expect(view.trimEnd().split('\n').at(-1)?.split(/\s{2,}/)).toEqual(['s', '-', 'unreachable', '-', '-', '-']);
  });
});
