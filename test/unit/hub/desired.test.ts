import { readFileSync } from 'node:fs';
import { loadYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { desiredPlan } from '../../../src/hub/desired.js';
import { buildRouteTable } from '../../../src/hub/route-builder.js';
import { parseUnitKey } from '../../../src/sharding/index.js';
import type { ClusterReport, ReportedObject } from '../../../src/transport/index.js';
import { clusterReport, HASH } from './report-fixture.js';

const hash = HASH;

function config(name: string, spec: unknown): ReportedObject {
  return {
    namespace: 'operator-demo',
    name,
    generation: 1,
    manifest: { apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1', kind: 'ShardingConfig', metadata: { name, namespace: 'operator-demo' }, spec },
  };
}

function report(cluster: string, configs: ReportedObject[]): ClusterReport {
  return clusterReport(cluster, configs, { objectCounts: [{ namespace: 'ns-a', resource: 'configmaps', count: 5 }] });
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

const EXAMPLES = new URL('../api/examples/', import.meta.url);
type Manifest = { kind: string; metadata: { name: string; namespace: string }; spec: unknown };
const example = (file: string): Manifest => loadYaml(readFileSync(new URL(file, EXAMPLES), 'utf8'));

/** A rule as the agent reports it: identity, generation and the manifest. */
function reported(manifest: Manifest, generation = 1): ReportedObject {
  const { name, namespace } = manifest.metadata;
  return { namespace, name, generation, manifest: { apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1', ...manifest, metadata: { name, namespace, generation } } };
}

const handWritten = config('demo', {
  selector: { matchLabels: { app: 'demo' } },
  limits: [{ relateResources: [{ apiGroups: [''], resources: ['configmaps'] }], selector: { matchExpressions: [{ key: hash.labels.hash, operator: 'In', values: ['0', '1'] }] } }],
});

describe('desiredPlan: the cluster rules of each shard', () => {
  const breaker = example('circuit-breaker.yaml');
  const faults = example('fault-injection.yaml');

  it("gives a shard the valid rules of its operator's namespace in its home cluster, sorted by kind then name", () => {
    const other = { ...breaker, metadata: { name: 'a-first', namespace: 'operator-demo' } };
    const elsewhere = { ...breaker, metadata: { name: 'elsewhere', namespace: 'someone-else' } };
    const invalid = { ...faults, metadata: { name: 'bad', namespace: 'operator-demo' }, spec: { httpFault: [{ name: 'x', delay: { fixedDelay: '1s', percent: 'lots' } }] } };
    const plan = desiredPlan({
      clusters,
      reports: new Map([
        ['a', { ...report('a', [handWritten]), circuitBreakers: [reported(breaker, 3), reported(other), reported(elsewhere)], faultInjections: [reported(faults, 2), reported(invalid)] }],
        // Cluster b has a rule of the same namespace: it never reaches a shard whose home is a.
        ['b', { ...report('b', []), circuitBreakers: [reported({ ...breaker, metadata: { name: 'from-b', namespace: 'operator-demo' } })] }],
      ]),
      health,
      previous: new Map(),
    });
    const [shard] = plan.operators.find((o) => o.operator === 'operator-demo/demo')?.shards ?? [];
    expect(shard?.rules?.map((r) => `${r.kind}/${r.namespace}/${r.name}@${r.generation}`)).toEqual([
      'CircuitBreaker/operator-demo/a-first@1',
      'CircuitBreaker/operator-demo/demo-breaker@3',
      'FaultInjection/operator-demo/demo-faults@2',
    ]);
    expect(shard?.rules?.[1]?.selector).toEqual({ matchLabels: { app: 'operator-demo' } });
    expect(shard?.rules?.[1]?.manifest).toMatchObject({ kind: 'CircuitBreaker', spec: breaker.spec });
  });

  it('puts rules in the route table only when there are some: a table without rules is what it was', () => {
    const plan = desiredPlan({ clusters, reports: new Map([['a', report('a', [handWritten])]]), health, previous: new Map() });
    const operator = plan.operators[0]!;
    const shard = operator.shards[0]!;
    expect(shard.rules).toEqual([]);
    const identities = new Map([['a', { name: 'a', labels: {}, server: 'https://a', caPem: 'ca' }]]);
    const options = { plan: operator, shard, shardName: shard.name, units: shard.units, clusters: identities, version: 5, now: new Date(0), leaseSeconds: 15 };
    expect(buildRouteTable(options)).not.toHaveProperty('rules');
    const rule = { kind: 'CircuitBreaker' as const, namespace: 'operator-demo', name: 'x', generation: 1, manifest: {} };
    expect(buildRouteTable({ ...options, shard: { ...shard, rules: [rule] } }).rules).toEqual([rule]);
  });
});

describe('desiredPlan: shard selectors', () => {
  const identities = new Map(['a', 'b'].map((name) => [name, { name, labels: {}, server: `https://${name}`, caPem: 'ca' }]));
  const selections = (plan: ReturnType<typeof desiredPlan>): Record<string, unknown> => {
    const operator = plan.operators[0]!;
    const shard = operator.shards[0]!;
    const table = buildRouteTable({ plan: operator, shard, shardName: shard.name, units: shard.units, clusters: identities, version: 1, now: new Date(0), leaseSeconds: 15 });
    return Object.fromEntries(table.clusters.map((c) => [c.name, c.selection ?? 'labels']));
  };
  const withLabels = (objectLabels: string): ReportedObject => {
    const manifest = spanningRoot.manifest as { spec: Record<string, unknown> };
    return config('demo-root', { ...manifest.spec, objectLabels });
  };

  it('names the spanned clusters whose agents report shard selectors, and the config\'s objectLabels', () => {
    const reports = new Map([
      ['a', { ...report('a', [spanningRoot]), shardSelectors: true }],
      ['b', { ...report('b', []), shardSelectors: false }],
    ]);
    const plan = desiredPlan({ clusters, reports, health, previous: new Map() });
    expect(plan.operators[0]).toMatchObject({ objectLabels: 'Auto', shardSelectorClusters: ['a'] });
    expect(selections(plan)).toEqual({ a: 'shardSelector', b: 'labels' });

    const never = desiredPlan({ clusters, reports: new Map([...reports, ['a', { ...reports.get('a')!, shardingConfigs: [withLabels('Never')] }]]), health, previous: new Map() });
    expect(never.operators[0]?.objectLabels).toBe('Never');
    expect(selections(never)).toEqual({ a: 'shardSelector', b: 'proxyFilter' });
  });

  it('carries the config\'s objectSharding into the plan, and nothing when it has none', () => {
    const manifest = spanningRoot.manifest as { spec: Record<string, unknown> };
    const objectSharding = [{ apiGroups: [''], resources: ['configmaps'] }];
    const reports = new Map([['a', report('a', [config('demo-root', { ...manifest.spec, objectSharding })])], ['b', report('b', [])]]);
    expect(desiredPlan({ clusters, reports, health, previous: new Map() }).operators[0]?.objectSharding).toEqual(objectSharding);
    const plain = desiredPlan({ clusters, reports: new Map([['a', report('a', [spanningRoot])], ['b', report('b', [])]]), health, previous: new Map() });
    expect(plain.operators[0]).not.toHaveProperty('objectSharding');
  });

  it('leaves the plan as it was when no cluster offers them (older agents say nothing)', () => {
    const plan = desiredPlan({ clusters, reports: new Map([['a', report('a', [spanningRoot])], ['b', report('b', [])]]), health, previous: new Map() });
    expect(plan.operators[0]).not.toHaveProperty('shardSelectorClusters');
    expect(selections(plan)).toEqual({ a: 'labels', b: 'labels' });
  });
});
