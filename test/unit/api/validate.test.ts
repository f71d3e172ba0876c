import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { loadAllYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { validateManifest, type ShardingConfigModel } from '../../../src/api/index.js';

const EXAMPLES = new URL('./examples/', import.meta.url).pathname;

function load(file: string): unknown {
  return loadAllYaml(readFileSync(join(EXAMPLES, file), 'utf8'))[0];
}

/** A copy of an example to break, and a way to reach into it without `any`. */
function copyOf(file: string): unknown {
  return structuredClone(load(file));
}
function at(doc: unknown, ...path: (string | number)[]): Record<string, unknown> {
  return path.reduce<unknown>((node, key) => (node as Record<string | number, unknown>)[key], doc) as Record<string, unknown>;
}

describe('validateManifest', () => {
  it.each(readdirSync(EXAMPLES))('accepts the reference example %s', (file) => {
    const result = validateManifest(load(file));
    expect(result.ok ? [] : result.problems).toEqual([]);
  });

  it('parses both limit forms to the same model', () => {
    const direct = validateManifest(load('sharding-config-manual.yaml'));
    const wrapped = validateManifest(load('sharding-config-objectselector.yaml'));
    if (!direct.ok || !wrapped.ok) throw new Error('examples must be valid');
    const strip = (m: ShardingConfigModel) => ({ ...m, limits: m.limits.map((l) => ({ ...l, selector: { ...l.selector, matchLabels: undefined } })) });
    expect(strip(direct.model as ShardingConfigModel)).toEqual(strip(wrapped.model as ShardingConfigModel));
    expect((wrapped.model as ShardingConfigModel).limits[0]?.relateResources).toEqual([{ apiGroups: ['*'], resources: ['pods', 'services'] }]);
  });

  it('normalises the auto root: numbers for buckets, resource groups as limits', () => {
    const result = validateManifest(load('sharding-config-auto.yaml'));
    if (!result.ok) throw new Error('example must be valid');
    const model = result.model as ShardingConfigModel;
    expect(model.root?.canary).toEqual({ replicas: 1, inNamespaces: ['ns-canary'], inShardHash: [7] });
    expect(model.root?.resourceSelector).toEqual([{ relateResources: [{ apiGroups: ['*'], resources: ['configmaps', 'pods'] }], selector: {} }]);
  });

  it('reports every error of a bad manifest at once, each with its field path', () => {
    const doc = copyOf('sharding-config-manual.yaml');
    (at(doc, 'spec', 'limits', 0, 'selector', 'matchExpressions') as unknown as unknown[]).push({ key: 'x', operator: 'Maybe', values: ['a'] });
    at(doc, 'spec', 'webhook').port = 'http';
    at(doc, 'spec', 'controller').extra = true;
    delete at(doc, 'spec', 'controller').leaderElectionName;
    const result = validateManifest(doc);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.kind).toBe('ShardingConfig');
    expect(result.name).toBe('sharding-demo');
    const byPath = Object.fromEntries(result.problems.map((p) => [p.path, p.reason]));
    expect(byPath['spec.limits[0].selector.matchExpressions[1].operator']).toBe('must be one of In, NotIn, Exists, DoesNotExist, not string "Maybe"');
    expect(byPath['spec.webhook.port']).toBe('must be an integer, not string "http"');
    expect(byPath['spec.controller.extra']).toMatch(/^unknown field; allowed here: leaderElectionName, multicluster/);
    expect(byPath['spec.controller.leaderElectionName']).toBe('is required');
    expect(result.problems).toHaveLength(4);
  });

  it('reports every semantic error at once', () => {
    const doc = copyOf('sharding-config-auto.yaml');
    at(doc, 'spec', 'root', 'canary').inShardHash = [7, 40];
    at(doc, 'spec', 'root', 'auto').shardingSize = 9;
    at(doc, 'spec').selector = { matchExpressions: [{ key: 'a', operator: 'In' }, { key: 'b', operator: 'Exists', values: ['x'] }] };
    const result = validateManifest(doc);
    if (result.ok) throw new Error('must be refused');
    expect(result.problems.map((p) => p.path)).toEqual([
      'spec.selector.matchExpressions[0].values',
      'spec.selector.matchExpressions[1].values',
      'spec.root.canary.inShardHash[1]',
      'spec.root.auto.shardingSize',
    ]);
  });

  it('refuses a limit written in both forms at once', () => {
    const doc = copyOf('sharding-config-objectselector.yaml');
    at(doc, 'spec', 'limits', 0).selector = {};
    const result = validateManifest(doc);
    expect(result.ok ? [] : result.problems).toEqual([{ path: 'spec.limits[0]', reason: 'use either relateResources/selector or objectSelector, not both' }]);
  });

  it('checks circuit breakers and fault injections beyond their shape', () => {
    const cb = copyOf('circuit-breaker.yaml');
    at(cb, 'spec', 'rateLimitings', 0, 'bucket').interval = 'soon';
    at(cb, 'spec', 'rateLimitings', 1).triggerPolicy = 'Sometimes';
    const r1 = validateManifest(cb);
    expect(r1.ok ? [] : r1.problems.map((p) => p.path)).toEqual(['spec.rateLimitings[0].bucket.interval', 'spec.rateLimitings[1].triggerPolicy']);
    at(cb, 'spec', 'rateLimitings', 0, 'bucket').interval = '1m';
    at(cb, 'spec', 'rateLimitings', 1).triggerPolicy = 'Normal';
    at(cb, 'spec', 'trafficInterceptRules', 0).contents = ['(unclosed'];
    const r2 = validateManifest(cb);
    expect(r2.ok ? [] : r2.problems.map((p) => p.path)).toEqual(['spec.trafficInterceptRules[0].contents[0]']);

    const fj = copyOf('fault-injection.yaml');
    at(fj, 'spec', 'httpFault', 0, 'delay').percent = '150';
    delete at(fj, 'spec', 'httpFault', 1).abort;
    const r3 = validateManifest(fj);
    expect(r3.ok ? [] : r3.problems).toEqual([
      { path: 'spec.httpFault[0].delay.percent', reason: 'must be from 0 to 100, not "150"' },
      { path: 'spec.httpFault[1]', reason: 'needs delay or abort: what fault does it inject?' },
    ]);
  });

  it('refuses other kinds and versions', () => {
    const r = validateManifest({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'x' } });
    expect(r.ok ? [] : r.problems[0]?.path).toBe('kind');
    const doc = at(copyOf('fault-injection.yaml'));
    doc.apiVersion = 'ctrlmesh.kusionstack.io/v1';
    const r2 = validateManifest(doc);
    expect(r2.ok ? [] : r2.problems).toEqual([{ path: 'apiVersion', reason: 'must be "ctrlmesh.kusionstack.io/v1alpha1", not string "ctrlmesh.kusionstack.io/v1"' }]);
  });
});
