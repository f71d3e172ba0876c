import { readFileSync } from 'node:fs';
import { loadAllYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { validateManifest, type ShardingConfigModel } from '../../../src/api/index.js';
import { createHashSettings, shardOfPod, shardsOfConfig, shardsOfConfigs } from '../../../src/sharding/index.js';

const settings = createHashSettings({ algorithm: 'kusionstack' });
const home = { homeCluster: 'eu-west-1', settings };

function example(file: string): ShardingConfigModel {
  const result = validateManifest(loadAllYaml(readFileSync(new URL(`../api/examples/${file}`, import.meta.url), 'utf8'))[0]);
  if (!result.ok || result.model.kind !== 'ShardingConfig') throw new Error(`${file} must be a valid ShardingConfig`);
  return result.model;
}

const autoRoot = example('sharding-config-auto.yaml');
const resourceSelector = autoRoot.root!.resourceSelector;
const spanning: ShardingConfigModel = {
  ...autoRoot,
  controller: { leaderElectionName: 'operator-leader', multicluster: true },
  root: { ...autoRoot.root!, clusters: { matchLabels: { fleet: 'prod' } } },
};

describe('shardsOfConfig', () => {
  it('reads a hand-written config as one shard on the buckets of the namespaces its limits name', () => {
    const manual = example('sharding-config-manual.yaml');
    expect(shardsOfConfig(manual, home)).toEqual({
      operator: 'operator-demo/sharding-demo',
      homeCluster: 'eu-west-1',
      multicluster: false,
      shards: [{ config: 'sharding-demo', name: 'eu-west-1/sharding-demo', buckets: [15, 16], limits: manual.limits, leaderElectionName: 'operator-leader' }],
      webhook: { certDir: '/tmp/webhook-certs', port: 9443 },
      objectLabels: 'Auto',
      objectSharding: [],
      unshardedWrites: [],
    });
  });

  it("carries the config's objectLabels, a root's for all its children", () => {
    expect(shardsOfConfig({ ...example('sharding-config-manual.yaml'), objectLabels: 'Never' }, home).objectLabels).toBe('Never');
    expect(shardsOfConfig({ ...autoRoot, objectLabels: 'Always' }, home).objectLabels).toBe('Always');
  });

  it('says which shard a pod runs: a hand-written config\'s one shard, a root\'s child by StatefulSet ordinal, or none', () => {
    expect(shardOfPod(shardsOfConfig(example('sharding-config-manual.yaml'), home), 'anything')?.name).toBe('eu-west-1/sharding-demo');
    const meaning = shardsOfConfig(autoRoot, home);
    expect(['operator-demo-0', 'operator-demo-2', 'operator-demo-4'].map((pod) => shardOfPod(meaning, pod)?.name)).toEqual([
      'eu-west-1/demo-0-canary',
      'eu-west-1/demo-1-normal',
      'eu-west-1/demo-2-normal',
    ]);
    expect(['operator-demo-5', 'operator-demo-x', 'other-1', 'operator-demo-'].map((pod) => shardOfPod(meaning, pod))).toEqual([undefined, undefined, undefined, undefined]);
  });

  it('reads a root without clusters as its KusionStack children, each fixed on its run of buckets under its own limits', () => {
    const meaning = shardsOfConfig(autoRoot, home);
    expect(meaning.operator).toBe('operator-demo/demo-root');
    expect(meaning.targetStatefulSet).toBe('operator-demo');
    expect(meaning.clusters).toBeUndefined();
    expect(meaning.shards.map((s) => [s.config, s.name, s.podOrdinals, s.buckets])).toEqual([
      ['demo-0-canary', 'eu-west-1/demo-0-canary', [0], [7]],
      ['demo-1-normal', 'eu-west-1/demo-1-normal', [1, 2], [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15]],
      ['demo-2-normal', 'eu-west-1/demo-2-normal', [3, 4], [16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]],
    ]);
    const normal = meaning.shards[1]!;
    expect(normal.limits[0]!.relateResources).toEqual(resourceSelector[0]!.relateResources);
    expect(normal.limits[0]!.selector.matchExpressions).toContainEqual({ key: settings.labels.hash, operator: 'In', values: [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15].map(String) });
  });

  it('plans the normal shards of a root with clusters under the root resourceSelector, and keeps its canary fixed', () => {
    const meaning = shardsOfConfig(spanning, home);
    expect(meaning.multicluster).toBe(true);
    expect(meaning.clusters).toEqual({ matchLabels: { fleet: 'prod' } });
    expect(meaning.shards.map((s) => [s.config, s.buckets, s.podOrdinals])).toEqual([
      ['demo-0-canary', [7], [0]],
      ['demo-1-normal', 'planned', [1, 2]],
      ['demo-2-normal', 'planned', [3, 4]],
    ]);
    expect(meaning.shards[1]!.limits).toBe(resourceSelector);
    expect(meaning.shards[2]!.limits).toBe(resourceSelector);
  });

  it("gives a canary child the limits of its namespaces and buckets, within the root's resources", () => {
    for (const root of [autoRoot, spanning]) {
      const [canary] = shardsOfConfig(root, home).shards;
      expect(canary!.config).toBe('demo-0-canary');
      expect(canary!.limits).toEqual([
        {
          relateResources: resourceSelector[0]!.relateResources,
          selector: {
            matchExpressions: [
              { key: settings.labels.namespace, operator: 'In', values: ['ns-canary'] },
              { key: settings.labels.hash, operator: 'In', values: ['7'] },
            ],
          },
        },
      ]);
    }
  });

  it("names every shard's leader-election lock after the config's, and none when the config names none", () => {
    expect(shardsOfConfig(spanning, home).shards.map((s) => s.leaderElectionName)).toEqual(['operator-leader', 'operator-leader', 'operator-leader']);
    const { controller: _, ...withoutController } = example('sharding-config-manual.yaml');
    const [shard] = shardsOfConfig(withoutController, home).shards;
    expect(shard).not.toHaveProperty('leaderElectionName');
  });

  it('gives a disabled root no shards, though it stays an operator', () => {
    const disabled = shardsOfConfig({ ...autoRoot, root: { ...autoRoot.root!, disable: true } }, home);
    expect(disabled.operator).toBe('operator-demo/demo-root');
    expect(disabled.shards).toEqual([]);
  });
});

describe('shardsOfConfigs', () => {
  it('puts roots first and skips a listed child, which its root stands for', () => {
    const manual = example('sharding-config-manual.yaml');
    const child: ShardingConfigModel = { ...manual, name: 'demo-1-normal' };
    expect(shardsOfConfigs([manual, child, autoRoot], home).map((m) => m.operator)).toEqual(['operator-demo/demo-root', 'operator-demo/sharding-demo']);
  });
});
