import { readFileSync } from 'node:fs';
import { loadAllYaml } from '@kubernetes/client-node';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { validateManifest, type ShardingConfigModel } from '../../../src/api/index.js';
import { bucketOf, compileSelector, createHashSettings, expandRoot, matches } from '../../../src/sharding/index.js';

const settings = createHashSettings({ algorithm: 'kusionstack' });

function autoExample(): ShardingConfigModel {
  const doc = loadAllYaml(readFileSync(new URL('../api/examples/sharding-config-auto.yaml', import.meta.url), 'utf8'))[0];
  const result = validateManifest(doc);
  if (!result.ok) throw new Error('example must be valid');
  return result.model as ShardingConfigModel;
}

function root(shardingSize: number, everyShardReplicas: number, canary?: { replicas: number; inNamespaces: string[]; inShardHash: number[] }): ShardingConfigModel {
  const model = autoExample();
  const spec = { ...model.root!, auto: { shardingSize, everyShardReplicas } };
  if (canary) spec.canary = canary;
  else delete spec.canary;
  return { ...model, root: spec };
}

describe('expandRoot', () => {
  it('derives the canary and normal children of the example as KusionStack does', () => {
    const shards = expandRoot(autoExample(), settings);
    expect(shards.map((s) => [s.config.name, s.role, s.podOrdinals, s.buckets])).toEqual([
      ['demo-0-canary', 'canary', [0], [7]],
      ['demo-1-normal', 'normal', [1, 2], [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15]],
      ['demo-2-normal', 'normal', [3, 4], [16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]],
    ]);
    const [canary, first] = shards;
    expect(canary!.config.namespace).toBe('operator-demo');
    expect(canary!.config.controller).toEqual({ leaderElectionName: 'operator-leader', multicluster: false });
    expect(canary!.config.selector.matchExpressions).toEqual([
      { key: 'statefulset.kubernetes.io/pod-name', operator: 'In', values: ['operator-demo-0'] },
    ]);
    expect(canary!.config.limits[0]!.selector.matchExpressions).toEqual([
      { key: 'ctrlmesh.kusionstack.io/namespace', operator: 'In', values: ['ns-canary'] },
      { key: 'ctrlmesh.kusionstack.io/sharding-hash', operator: 'In', values: ['7'] },
    ]);
    expect(first!.config.limits[0]!.relateResources).toEqual([{ apiGroups: ['*'], resources: ['configmaps', 'pods'] }]);
    expect(first!.config.limits[0]!.selector.matchExpressions?.slice(0, 2)).toEqual([
      { key: 'ctrlmesh.kusionstack.io/namespace', operator: 'NotIn', values: ['ns-canary'] },
      { key: 'ctrlmesh.kusionstack.io/sharding-hash', operator: 'NotIn', values: ['7'] },
    ]);
  });

  it('works without a canary (the original crashes there)', () => {
    const shards = expandRoot(root(3, 1), settings);
    expect(shards.map((s) => [s.config.name, s.podOrdinals, s.buckets.length])).toEqual([
      ['demo-1-normal', [0], 11],
      ['demo-2-normal', [1], 11],
      ['demo-3-normal', [2], 10],
    ]);
  });

  it('covers every bucket exactly once and every object of a normal namespace once (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 3 }),
        fc.option(fc.uniqueArray(fc.integer({ min: 0, max: 31 }), { maxLength: 4 })),
        fc.string({ minLength: 1, maxLength: 12 }),
        (size, replicas, canaryHashes, ns) => {
          const shards = expandRoot(root(size, replicas, canaryHashes ? { replicas: 1, inNamespaces: [], inShardHash: canaryHashes } : undefined), settings);
          const owned = shards.flatMap((s) => s.buckets).sort((a, b) => a - b);
          expect(owned).toEqual(Array.from({ length: 32 }, (_, i) => i));
          const ordinals = shards.flatMap((s) => s.podOrdinals);
          expect(ordinals).toEqual(Array.from({ length: ordinals.length }, (_, i) => i));
          const labels = { 'ctrlmesh.kusionstack.io/sharding-hash': String(bucketOf(ns, settings)), 'ctrlmesh.kusionstack.io/namespace': ns };
          const owners = shards.filter((s) => matches(compileSelector(s.config.limits[0]!.selector), labels));
          expect(owners).toHaveLength(1);
        },
      ),
    );
  });

  it('gives nothing for a disabled root', () => {
    const model = autoExample();
    expect(expandRoot({ ...model, root: { ...model.root!, disable: true } }, settings)).toEqual([]);
  });
});
