import { describe, expect, it } from 'vitest';
import { desiredPlan } from '../../../src/hub/desired.js';
import type { OperatorPlan } from '../../../src/hub/plan.js';
import { buildRouteTable } from '../../../src/hub/route-builder.js';
import { unitKey } from '../../../src/sharding/index.js';
import { MESSAGE_SCHEMA_VERSION, type ClusterReport } from '../../../src/transport/index.js';
import type { ReportedPod } from '../../../src/transport/messages.js';

const hash = {
  algorithm: 'fnv' as const,
  bucketCount: 32,
  labels: { hash: 'ctrlmesh.kusionstack.io/sharding-hash', namespace: 'ctrlmesh.kusionstack.io/namespace', control: 'ctrlmesh.kusionstack.io/control' },
};

function rootReport(cluster: string, spec: Record<string, unknown>, pods: ReportedPod[]): ClusterReport {
  const name = 'demo-root';
  return {
    schema: MESSAGE_SCHEMA_VERSION,
    cluster,
    sentAt: '2026-01-01T00:00:00.000Z',
    hash,
    shardingConfigs: [
      {
        namespace: 'op',
        name,
        generation: 1,
        manifest: {
          apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1',
          kind: 'ShardingConfig',
          metadata: { name, namespace: 'op' },
          spec: {
            root: { prefix: 'demo', targetStatefulSet: 'demo', auto: { shardingSize: 3, everyShardReplicas: 1 }, resourceSelector: [{ apiGroups: [''], resources: ['configmaps'] }] },
            controller: { leaderElectionName: 'demo-leader' },
            selector: { matchLabels: { app: 'demo' } },
            ...spec,
          },
        },
      },
    ],
    circuitBreakers: [],
    faultInjections: [],
    pods,
    namespaces: [],
    objectCounts: [],
  };
}

const pod = (name: string, shard: string | undefined, ip: string | undefined, ready = true): ReportedPod => ({
  namespace: 'op',
  name,
  labels: { app: 'demo' },
  ready,
  ...(ip ? { ip } : {}),
  ...(shard ? { shard } : {}),
});

const PODS = [
  pod('demo-0', 'a/demo-1-normal', '10.0.0.5'),
  pod('demo-1', 'a/demo-2-normal', '10.0.0.6'),
  pod('demo-2', 'a/demo-3-normal', '10.0.0.7', false),
  pod('stray', undefined, '10.0.0.9'),
];

function plan(spec: Record<string, unknown>): OperatorPlan {
  const result = desiredPlan({
    clusters: new Map([['a', { labels: {} }]]),
    reports: new Map([['a', rootReport('a', spec, PODS)]]),
    health: new Map([['a', 'Ready' as const]]),
    previous: new Map(),
  });
  return result.operators[0] as OperatorPlan;
}

describe('route tables of an operator with spec.webhook', () => {
  it('the plan carries the webhook port and every shard\'s ready pod IPs (a shard without one: empty)', () => {
    expect(plan({ webhook: { certDir: '/certs', port: 9443 } }).webhook).toEqual({
      port: 9443,
      endpoints: { 'a/demo-1-normal': ['10.0.0.5'], 'a/demo-2-normal': ['10.0.0.6'], 'a/demo-3-normal': [] },
    });
    expect(plan({}).webhook).toBeUndefined();
  });

  it('names the owner of every bucket another shard is granted, leaves out units in flight, and adds the endpoints', () => {
    const operator = plan({ webhook: { certDir: '/certs', port: 9443 } });
    const granted = {
      'a/demo-1-normal': [unitKey('a', 0), unitKey('a', 1)],
      'a/demo-2-normal': [unitKey('a', 2)],
      // Bucket 3 is in flight: revoked from one shard, granted to none yet.
      'a/demo-3-normal': [unitKey('a', 4)],
    };
    const table = buildRouteTable({
      plan: operator,
      shard: operator.shards.find((s) => s.name === 'a/demo-1-normal'),
      shardName: 'a/demo-1-normal',
      units: granted['a/demo-1-normal'],
      granted,
      clusters: new Map([['a', { name: 'a', labels: {}, server: 'https://a:6443', caPem: 'CA' }]]),
      version: 1,
      now: new Date('2026-01-01T00:00:00Z'),
      leaseSeconds: 15,
    });
    expect(table.clusters[0]?.buckets).toEqual([0, 1]);
    expect(table.clusters[0]?.bucketOwners).toEqual({ 2: 'a/demo-2-normal', 4: 'a/demo-3-normal' });
    expect(table.webhook).toEqual(operator.webhook);
  });

  it('an operator without spec.webhook gets no owners and no webhook, whatever is granted', () => {
    const operator = plan({});
    const table = buildRouteTable({
      plan: operator,
      shard: operator.shards[0],
      shardName: operator.shards[0]?.name as string,
      units: [unitKey('a', 0)],
      granted: { other: [unitKey('a', 1)] },
      clusters: new Map([['a', { name: 'a', labels: {}, server: 'https://a:6443', caPem: 'CA' }]]),
      version: 1,
      now: new Date('2026-01-01T00:00:00Z'),
      leaseSeconds: 15,
    });
    expect(table.clusters[0]).not.toHaveProperty('bucketOwners');
    expect(table).not.toHaveProperty('webhook');
  });
});
