import { readFileSync } from 'node:fs';
import { loadAllYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { validateManifest, type ShardingConfigModel } from '../../../src/api/index.js';
import { bucketsOfLimits, createHashSettings, operatorsFromConfigs, plan } from '../../../src/sharding/index.js';

const settings = createHashSettings({ algorithm: 'kusionstack' });

function example(file: string): ShardingConfigModel {
  const result = validateManifest(loadAllYaml(readFileSync(new URL(`../api/examples/${file}`, import.meta.url), 'utf8'))[0]);
  if (!result.ok) throw new Error(`${file} must be valid`);
  return result.model as ShardingConfigModel;
}

describe('operatorsFromConfigs', () => {
  it('keeps a hand-written config on the buckets of the namespaces its limits name (ns-a -> 15, ns-b -> 16)', () => {
    const ops = operatorsFromConfigs([example('sharding-config-manual.yaml')], { homeCluster: 'a', settings });
    expect(ops).toEqual([{ name: 'operator-demo/sharding-demo', multicluster: false, shards: [{ name: 'sharding-demo', homeCluster: 'a', buckets: [15, 16] }] }]);
  });

  it('turns a root without clusters into the KusionStack runs, fixed, and skips its listed children', () => {
    const root = example('sharding-config-auto.yaml');
    const child: ShardingConfigModel = { ...example('sharding-config-manual.yaml'), name: 'demo-1-normal' };
    const [op, ...rest] = operatorsFromConfigs([root, child], { homeCluster: 'a', settings });
    expect(rest).toEqual([]);
    expect(op!.shards.map((s) => [s.name, s.buckets?.length])).toEqual([
      ['demo-0-canary', 1],
      ['demo-1-normal', 15],
      ['demo-2-normal', 16],
    ]);
    const result = plan({ hash: { algorithm: 'kusionstack' }, clusters: [{ name: 'a' }], weights: [], operators: [op!] });
    expect(result.assignment.operators['operator-demo/demo-root']!['demo-0-canary']).toEqual({ a: [7] });
  });

  it('plans the normal shards of a root that spans clusters', () => {
    const base = example('sharding-config-auto.yaml');
    const root: ShardingConfigModel = { ...base, controller: { leaderElectionName: 'x', multicluster: true }, root: { ...base.root!, clusters: { matchLabels: { fleet: 'prod' } } } };
    const [op] = operatorsFromConfigs([root], { homeCluster: 'a', settings });
    expect(op!.shards.map((s) => s.buckets === undefined)).toEqual([false, true, true]);
    const result = plan({
      clusters: [{ name: 'a', labels: { fleet: 'prod' } }, { name: 'b', labels: { fleet: 'prod' } }],
      weights: [],
      operators: [op!],
    });
    const shards = result.assignment.operators['operator-demo/demo-root']!;
    expect(Object.keys(shards['demo-1-normal']!).sort()).toEqual(['a', 'b']);
    expect(result.unassigned).toEqual([]);
  });

  it('reads hash In/NotIn from limits', () => {
    const key = settings.labels.hash;
    expect(bucketsOfLimits([{ relateResources: [], selector: { matchExpressions: [{ key, operator: 'In', values: ['1', '2', '3'] }, { key, operator: 'NotIn', values: ['2'] }] } }], settings)).toEqual([1, 3]);
    expect(bucketsOfLimits([], settings)).toHaveLength(32);
  });
});
