// A member cluster's report is that cluster's word alone: what an attacker who controls one member cluster (its API
// server and its agent's identity) reports must not stop the hub's passes for everyone else nor reach their tables
// (on the pure cores; the hub drops a report reportProblem names).
import { describe, expect, it } from 'vitest';
import { validateManifest } from '../../../src/api/index.js';
import { desiredPlan } from '../../../src/hub/desired.js';
import { createHashSettings, parseUnitKey } from '../../../src/sharding/index.js';
import { reportProblem } from '../../../src/hub/report-check.js';
import { Messages, encodeMessage, type ReportedObject } from '../../../src/transport/index.js';
import { clusterReport, HASH } from './report-fixture.js';

const hash = HASH;

function config(namespace: string, name: string, spec: unknown): ReportedObject {
  return { namespace, name, generation: 1, manifest: { apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1', kind: 'ShardingConfig', metadata: { name, namespace }, spec } };
}

function root(namespace: string, name: string, auto: { shardingSize: number; everyShardReplicas: number }): ReportedObject {
  return config(namespace, name, {
    root: { prefix: name, targetStatefulSet: name, auto, resourceSelector: [{ apiGroups: [''], resources: ['configmaps'] }] },
    selector: { matchLabels: { app: name } },
  });
}

const report = clusterReport;

const clusters = new Map([
  ['evil', { labels: {} }],
  ['prod-a', { labels: {} }],
]);
const health = new Map([
  ['evil', 'Ready' as const],
  ['prod-a', 'Ready' as const],
]);
const prodRoot = root('operator-prod', 'prod', { shardingSize: 2, everyShardReplicas: 1 });

describe('a rogue member cluster reports', () => {
  it('a root of a billion replicas: invalid, naming the field, and planned in no time while prod plans on', () => {
    const huge = root('evil-ns', 'huge', { shardingSize: 1, everyShardReplicas: 1_000_000_000 });
    const result = validateManifest(huge.manifest, { bucketCount: 32 });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.problems.map((p) => p.path)).toContain('spec.root.auto.everyShardReplicas');
    const started = performance.now();
    const plan = desiredPlan({ clusters, reports: new Map([['evil', report('evil', [huge])], ['prod-a', report('prod-a', [prodRoot])]]), health, previous: new Map() });
    expect(performance.now() - started).toBeLessThan(2000);
    expect(plan.frozen).toEqual(['evil-ns/huge']);
    expect(plan.operators.map((o) => o.operator)).toEqual(['operator-prod/prod']);
  });

  it('a root within each field but over the total pods: invalid at spec.root.auto', () => {
    const many = root('evil-ns', 'many', { shardingSize: 4, everyShardReplicas: 5000 });
    const result = validateManifest(many.manifest, { bucketCount: 32 });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.problems.find((p) => p.path === 'spec.root.auto')?.reason).toMatch(/20000 pods.*at most 10000/u);
  });

  it('two configs that claim one shard: only its own operators freeze, prod is planned', () => {
    const a = config('evil-ns', 'twin', { limits: [{ relateResources: [{ apiGroups: [''], resources: ['configmaps'] }] }] });
    const plan = desiredPlan({ clusters, reports: new Map([['evil', report('evil', [a, a])], ['prod-a', report('prod-a', [prodRoot])]]), health, previous: new Map() });
    expect(plan.operators.map((o) => o.operator)).toEqual(['operator-prod/prod']);
    expect(plan.frozen).toEqual(['evil-ns/twin']);
  });

  it('is dropped on arrival when it names hash settings the planner cannot use, another cluster\'s shard, or an object twice', () => {
    expect(reportProblem(report('prod-a', [prodRoot]))).toBeUndefined();
    expect(reportProblem(report('evil', [], { hash: { ...hash, labels: { ...hash.labels, hash: 'not a key!' } } }))).toMatch(/^hash: label key for hash/u);
    expect(reportProblem(report('evil', [], { hash: { ...hash, bucketCount: 70_000 } }))).toMatch(/^hash: bucket count/u);
    const stolen = { namespace: 'evil-ns', name: 'p', labels: {}, ready: true, ip: '10.66.6.6', shard: 'prod-a/prod-2-normal' };
    expect(reportProblem(report('evil', [], { pods: [stolen] }))).toMatch(/claims shard "prod-a\/prod-2-normal" of another cluster/u);
    // A cluster whose name begins like another's is still another cluster.
    expect(reportProblem(report('prod', [], { pods: [stolen] }))).toMatch(/another cluster/u);
    expect(reportProblem(report('prod-a', [], { pods: [stolen] }))).toBeUndefined();
    expect(reportProblem(report('evil', [prodRoot, prodRoot]))).toBe('ShardingConfig operator-prod/prod is listed twice');
  });

  it('counts past a billion or bucket counts past 65,536 are no report at all (the message schema)', () => {
    expect(() => encodeMessage(Messages.clusterReport, report('evil', [], { objectCounts: [{ namespace: 'x', resource: 'configmaps', count: 1e308 }] }))).toThrow();
    expect(() => encodeMessage(Messages.clusterReport, report('evil', [], { hash: { ...hash, bucketCount: 70_000 } }))).toThrow();
  });

  describe('hash settings other than the fleet\'s, with the hub given them (--hash-algorithm)', () => {
    const fleet = createHashSettings(hash);
    const evilHash = { ...hash, algorithm: 'kusionstack' as const, labels: { ...hash.labels, hash: 'evil.example/none' } };

    it('are dropped on arrival, naming both', () => {
      expect(reportProblem(report('prod-a', [prodRoot]), fleet)).toBeUndefined();
      expect(reportProblem(report('evil', [], { hash: evilHash }), fleet)).toBe(
        "hash: the agent labels by kusionstack over 32 buckets, label evil.example/none, the hub's fleet by fnv-range over 32 buckets, label ctrlmesh.kusionstack.io/sharding-hash (--hash-algorithm of both)",
      );
    });

    it('take over nothing: with the hub\'s settings prod\'s tables keep them; a stored report that hashes otherwise freezes every operator rather than revoking', () => {
      const prodOnly = new Map([['prod-a', report('prod-a', [prodRoot])]]);
      const plan = desiredPlan({ hash: fleet, clusters, reports: prodOnly, health, previous: new Map() });
      const prod = plan.operators.find((o) => o.operator === 'operator-prod/prod');
      expect(prod?.hashAlgorithm).toBe('fnv-range');
      expect(prod?.labels.hash).toBe(hash.labels.hash);
      // evil sorts first by name: a hub without --hash-algorithm takes evil's settings for prod's tables.
      const reports = new Map([['evil', report('evil', [], { hash: evilHash })], ['prod-a', report('prod-a', [prodRoot])]]);
      expect(desiredPlan({ clusters, reports, health, previous: new Map() }).operators[0]?.labels.hash).toBe('evil.example/none');
      // Such a report only arrives stored from before the flag (new ones are dropped on arrival): nothing is planned
      // with it, and nothing published is withdrawn.
      const previous = new Map([['operator-prod/prod', {}]]);
      const frozen = desiredPlan({ hash: fleet, clusters, reports, health, previous });
      expect(frozen.operators).toEqual([]);
      expect(frozen.frozen).toEqual(['operator-prod/prod']);
      expect(frozen.outOfStep).toEqual(['evil']);
    });
  });

  describe("another cluster's operator, by its namespace and name", () => {
    /** prod's root spans every cluster labelled env=prod; evil labels itself so (no labels on its token line). */
    const spanning = (name: string, spec: Record<string, unknown>): ReportedObject =>
      config('operator-prod', name, {
        root: { prefix: name, targetStatefulSet: name, auto: { shardingSize: 2, everyShardReplicas: 1 }, resourceSelector: [{ apiGroups: [''], resources: ['configmaps'] }], clusters: { matchLabels: { env: 'prod' } } },
        selector: { matchLabels: { app: name } },
        controller: { leaderElectionName: name, multicluster: true },
        ...spec,
      });
    const prodConfig = spanning('prod', {});
    // evil's copy: more shards, a webhook port and labels of its choosing.
    const takeover = config('operator-prod', 'prod', {
      ...(spanning('prod', {}).manifest as { spec: Record<string, unknown> }).spec,
      root: { prefix: 'prod', targetStatefulSet: 'prod', auto: { shardingSize: 6, everyShardReplicas: 1 }, resourceSelector: [{ apiGroups: [''], resources: ['configmaps'] }], clusters: {} },
      webhook: { certDir: '/tmp', port: 6666 },
      objectLabels: 'Never',
    });
    const labelled = new Map([
      ['evil', { labels: { env: 'prod' } }],
      ['prod-a', { labels: { env: 'prod' } }],
    ]);
    const fromProd = new Map([['prod-a', report('prod-a', [prodConfig])]]);
    const fromBoth = new Map([['evil', report('evil', [takeover, root('evil-ns', 'own', { shardingSize: 1, everyShardReplicas: 1 })])], ['prod-a', report('prod-a', [prodConfig])]]);
    const file = [{ operator: 'operator-prod/prod', clusters: ['prod-a'] }];

    it('joins it without an operator file: shards, span, webhook port and labels are evil\'s to set', () => {
      const prod = desiredPlan({ clusters: labelled, reports: fromBoth, health, previous: new Map() }).operators.find((o) => o.operator === 'operator-prod/prod');
      expect(prod?.shards.some((s) => s.homeCluster === 'evil')).toBe(true);
      expect(prod?.clusters).toContain('evil');
    });

    it('changes nothing of it with the hub\'s --operator-file: the plan is the one prod\'s report alone makes', () => {
      const alone = desiredPlan({ clusters: labelled, operators: file, reports: fromProd, health, previous: new Map() });
      const plan = desiredPlan({ clusters: labelled, operators: file, reports: fromBoth, health, previous: new Map() });
      expect(plan.operators).toEqual(alone.operators);
      const prod = plan.operators[0];
      expect(prod?.operator).toBe('operator-prod/prod');
      // Its span stops at the listed clusters, whatever label evil gives itself.
      expect(prod?.clusters).toEqual(['prod-a']);
      expect(prod?.shards.flatMap((s) => s.units.map((u) => parseUnitKey(u).cluster))).not.toContain('evil');
      expect(prod?.webhook).toBeUndefined();
      expect(prod?.objectLabels).toBe('Auto');
      expect(plan.notAdmitted).toEqual([
        { operator: 'operator-prod/prod', cluster: 'evil' },
        { operator: 'evil-ns/own', cluster: 'evil' },
      ]);
      expect(plan.frozen).toEqual([]);
    });

    it('under another name in the listing than in its manifest: the report is dropped, and the manifest\'s name is what the file is checked against', () => {
      const disguised = { ...takeover, namespace: 'evil-ns', name: 'own' };
      expect(reportProblem(report('evil', [disguised]))).toBe('ShardingConfig evil-ns/own: its manifest names another object');
      const listed = [...file, { operator: 'evil-ns/own', clusters: ['evil'] }];
      const plan = desiredPlan({ clusters: labelled, operators: listed, reports: new Map([['evil', report('evil', [disguised])], ['prod-a', report('prod-a', [prodConfig])]]), health, previous: new Map() });
      expect(plan.operators.map((o) => o.operator)).toEqual(['operator-prod/prod']);
      expect(plan.notAdmitted).toEqual([{ operator: 'operator-prod/prod', cluster: 'evil' }]);
    });

    /** prod as granted before: one shard in prod-a. */
    const granted = new Map([['operator-prod/prod', { 'prod-a/prod-0-normal': [] }]]);

    it('an invalid copy freezes nothing it is not admitted to', () => {
      const broken = config('operator-prod', 'prod', { root: { prefix: 'prod' } });
      const previous = granted;
      const plan = desiredPlan({ clusters: labelled, operators: file, reports: new Map([['evil', report('evil', [broken])], ['prod-a', report('prod-a', [prodConfig])]]), health, previous });
      expect(plan.frozen).toEqual([]);
      expect(plan.operators.map((o) => o.operator)).toEqual(['operator-prod/prod']);
    });

    it('an operator the file leaves out keeps its tables while still configured where it ran, and is withdrawn once not', () => {
      const previous = granted;
      const unlisted = desiredPlan({ clusters: labelled, operators: [], reports: fromProd, health, previous });
      expect(unlisted.operators).toEqual([]);
      expect(unlisted.frozen).toEqual(['operator-prod/prod']);
      expect(unlisted.notAdmitted).toEqual([{ operator: 'operator-prod/prod', cluster: 'prod-a' }]);
      // Listed with a misspelt cluster: the same.
      expect(desiredPlan({ clusters: labelled, operators: [{ operator: 'operator-prod/prod', clusters: ['prod-b'] }], reports: fromProd, health, previous }).frozen).toEqual(['operator-prod/prod']);
      const gone = desiredPlan({ clusters: labelled, operators: [], reports: new Map([['prod-a', report('prod-a', [])]]), health, previous });
      expect(gone.frozen).toEqual([]);
      expect(gone.notAdmitted).toBeUndefined();
    });
  
    it("a copy cannot pin a decommissioned operator's tables: only the clusters its shards ran in keep it frozen", () => {
      const copy = new Map([['evil', report('evil', [takeover])], ['prod-a', report('prod-a', [])]]);
      for (const operators of [file, []]) {
        const plan = desiredPlan({ clusters: labelled, operators, reports: copy, health, previous: granted });
        expect(plan.frozen).toEqual([]);
        expect(plan.operators).toEqual([]);
      }
    });
  });
});
