import { describe, expect, it } from 'vitest';
import { desiredPlan, type DesiredInput } from '../../../src/hub/desired.js';
import type { ReportedObject } from '../../../src/transport/index.js';
import { clusterReport } from './report-fixture.js';

/** The same multicluster root in clusters a and b: one planned shard in each, sharing both clusters' units. */
const root: ReportedObject = {
  namespace: 'ops',
  name: 'fo',
  generation: 1,
  manifest: {
    apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1',
    kind: 'ShardingConfig',
    metadata: { name: 'fo', namespace: 'ops' },
    spec: {
      root: { prefix: 'fo', targetStatefulSet: 'fo', auto: { shardingSize: 1, everyShardReplicas: 1 }, resourceSelector: [{ apiGroups: [''], resources: ['configmaps'] }], clusters: {} },
      controller: { leaderElectionName: 'fo', multicluster: true },
      selector: { matchLabels: { app: 'fo' } },
    },
  },
};

const base: DesiredInput = {
  clusters: new Map([
    ['a', { labels: {} }],
    ['b', { labels: {} }],
  ]),
  reports: new Map([
    ['a', clusterReport('a', [root])],
    ['b', clusterReport('b', [root])],
  ]),
  health: new Map([
    ['a', 'Ready'],
    ['b', 'Unknown'],
  ]),
  moveUnitsOfOfflineClusters: true,
  previous: new Map(),
};
const unitsOf = (plan: ReturnType<typeof desiredPlan>, shard: string): number => plan.operators[0]?.shards.find((s) => s.name === shard)?.units.length ?? -1;

describe('failover from an Offline cluster, seen by a hub that has just started', () => {
  const failedOver = new Map([['ops/fo', { 'a/fo-1-normal': Array.from({ length: 64 }, (_, i) => `${i % 32}@${i < 32 ? 'a' : 'b'}`), 'b/fo-1-normal': [] }]]);

  it('gives a shard no units back while its cluster has not been heard from', () => {
    const plan = desiredPlan({ ...base, previous: failedOver, heard: new Set(['a']) });
    expect(unitsOf(plan, 'a/fo-1-normal')).toBe(64);
    expect(unitsOf(plan, 'b/fo-1-normal')).toBe(0);
  });

  it('shares them again once it is heard from', () => {
    const plan = desiredPlan({ ...base, previous: failedOver, heard: new Set(['a', 'b']) });
    expect(unitsOf(plan, 'b/fo-1-normal')).toBeGreaterThan(0);
  });

  it('takes nothing from a shard that owns units while its cluster is merely not heard from yet', () => {
    const shared = new Map([['ops/fo', { 'a/fo-1-normal': Array.from({ length: 32 }, (_, i) => `${i}@a`), 'b/fo-1-normal': Array.from({ length: 32 }, (_, i) => `${i}@b`) }]]);
    const plan = desiredPlan({ ...base, previous: shared, heard: new Set(['a']) });
    expect(unitsOf(plan, 'b/fo-1-normal')).toBe(32);
  });
});
