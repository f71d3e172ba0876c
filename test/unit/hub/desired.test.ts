import { describe, expect, it } from 'vitest';
import { desiredPlan } from '../../../src/hub/desired.js';
import { parseUnitKey } from '../../../src/sharding/index.js';
import { MESSAGE_SCHEMA_VERSION, type ClusterReport, type ReportedObject } from '../../../src/transport/index.js';

const hash = {
  algorithm: 'fnv' as const,
  bucketCount: 32,
  labels: { hash: 'ctrlmesh.kusionstack.io/sharding-hash', namespace: 'ctrlmesh.kusionstack.io/namespace', control: 'ctrlmesh.kusionstack.io/control' },
};

function config(name: string, spec: unknown): ReportedObject {
  return {
    namespace: 'operator-demo',
    name,
    generation: 1,
    manifest: { apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1', kind: 'ShardingConfig', metadata: { name, namespace: 'operator-demo' }, spec },
  };
}

function report(cluster: string, configs: ReportedObject[]): ClusterReport {
  return {
    schema: MESSAGE_SCHEMA_VERSION,
    cluster,
    sentAt: '2026-01-01T00:00:00.000Z',
    hash,
    shardingConfigs: configs,
    circuitBreakers: [],
    faultInjections: [],
    pods: [],
    namespaces: [],
    objectCounts: [{ namespace: 'ns-a', resource: 'configmaps', count: 5 }],
  };
}

const spanningRoot = config('demo-root', {
  root: {
    prefix: 'demo',
    targetStatefulSet: 'operator-demo',
    auto: { shardingSize: 2, everyShardReplicas: 1 },
    resourceSelector: [{ apiGroups: [''], resources: ['configmaps'] }],
    clusters: {},
  },
  controller: { leaderElectionName: 'operator-leader', multicluster: true },
  selector: { matchLabels: { app: 'operator-demo' } },
});

const clusters = new Map([
  ['a', { labels: {} }],
  ['b', { labels: {} }],
]);
const health = new Map([
  ['a', 'Ready' as const],
  ['b', 'Ready' as const],
]);

describe('desiredPlan', () => {
  it('covers every (cluster, bucket) exactly once for a root spanning two clusters', () => {
    const plan = desiredPlan({ clusters, reports: new Map([['a', report('a', [spanningRoot])], ['b', report('b', [])]]), health, previous: new Map() });
    expect(plan.frozen).toEqual([]);
    expect(plan.operators).toHaveLength(1);
    const op = plan.operators[0];
    expect(op?.operator).toBe('operator-demo/demo-root');
    expect(op?.shards.map((s) => s.name).sort()).toEqual(['a/demo-1-normal', 'a/demo-2-normal']);
    expect(op?.shards[0]?.leaderElectionName).toBe('operator-leader');
    const units = op?.shards.flatMap((s) => s.units) ?? [];
    expect(new Set(units).size).toBe(units.length);
    expect(units).toHaveLength(64);
    expect(new Set(units.map((u) => parseUnitKey(u).cluster))).toEqual(new Set(['a', 'b']));
  });

  it('freezes an operator whose config is invalid', () => {
    const bad = config('hand', { limits: [{ selector: { matchExpressions: [{ key: 'x', operator: 'Near' }] } }] });
    const plan = desiredPlan({ clusters, reports: new Map([['a', report('a', [bad])]]), health, previous: new Map() });
    expect(plan.frozen).toEqual(['operator-demo/hand']);
    expect(plan.operators).toEqual([]);
  });
});
