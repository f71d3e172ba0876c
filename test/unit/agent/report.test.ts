import type { KubernetesObject, V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { buildReport } from '../../../src/agent/report.js';
import { ShardingConfigValidator } from '../../../src/agent/sharding-configs.js';
import { createHashSettings } from '../../../src/sharding/index.js';
import { decodeMessage, encodeMessage, Messages } from '../../../src/transport/index.js';

const settings = createHashSettings({ algorithm: 'fnv' });

const sharding = (name: string, spec: Record<string, unknown>): KubernetesObject =>
  ({ apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1', kind: 'ShardingConfig', metadata: { name, namespace: 'op', generation: 1 }, spec }) as KubernetesObject;

const root = sharding('demo-root', {
  root: { prefix: 'demo', targetStatefulSet: 'demo', auto: { shardingSize: 2, everyShardReplicas: 1 }, resourceSelector: [{ apiGroups: [''], resources: ['configmaps'] }] },
  selector: { matchLabels: { app: 'demo' } },
});
const manual = sharding('manual', { selector: { matchLabels: { app: 'manual' } } });
const overlapping = sharding('overlap', { selector: { matchLabels: { tier: 'both' } } });

function pod(name: string, labels: Record<string, string>, ip?: string, ready = true): V1Pod {
  return {
    metadata: { name, namespace: 'op', labels },
    status: { ...(ip ? { podIP: ip } : {}), conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
  };
}

describe('buildReport: pods', () => {
  it('reports each selected pod with its IP and the shard it runs, decided as the injector decides it', () => {
    const validator = new ShardingConfigValidator(settings.bucketCount);
    const report = buildReport({
      cluster: 'a',
      settings,
      shardingConfigs: [root, manual, overlapping].map((c) => validator.validate(c)),
      circuitBreakers: [],
      faultInjections: [],
      pods: [
        pod('demo-0', { app: 'demo' }, '10.0.0.4'),
        pod('demo-1', { app: 'demo' }, '10.0.0.5', false),
        pod('demo-7', { app: 'demo' }),
        pod('hand', { app: 'manual' }, '10.0.0.6'),
        pod('twice', { app: 'manual', tier: 'both' }, '10.0.0.7'),
        pod('nobody', { app: 'other' }, '10.0.0.8'),
      ],
      namespaces: [],
      related: new Map(),
      shardSelectors: false,
      now: new Date('2026-01-01T00:00:00Z'),
    });
    expect(report.pods.map(({ name, ready, ip, shard }) => ({ name, ready, ip, shard }))).toEqual([
      { name: 'demo-0', ready: true, ip: '10.0.0.4', shard: 'a/demo-1-normal' },
      { name: 'demo-1', ready: false, ip: '10.0.0.5', shard: 'a/demo-2-normal' },
      // Not one of the root's pods by ordinal, and no IP yet.
      { name: 'demo-7', ready: true, ip: undefined, shard: undefined },
      { name: 'hand', ready: true, ip: '10.0.0.6', shard: 'a/manual' },
      // Selected by two configs: the injector refuses such a pod, so it runs no shard.
      { name: 'twice', ready: true, ip: '10.0.0.7', shard: undefined },
    ]);
  });
});

describe('buildReport: shard selectors', () => {
  const input = {
    cluster: 'a',
    settings,
    shardingConfigs: [],
    circuitBreakers: [],
    faultInjections: [],
    pods: [],
    namespaces: [],
    related: new Map<string, KubernetesObject[]>(),
    now: new Date('2026-01-01T00:00:00Z'),
  };

  it('says whether the API server filters by shard selector, in a report the schema accepts', () => {
    for (const shardSelectors of [true, false]) {
      const report = buildReport({ ...input, shardSelectors });
      expect(report.shardSelectors).toBe(shardSelectors);
      expect(decodeMessage(Messages.clusterReport, encodeMessage(Messages.clusterReport, report))).toEqual({ ok: true, value: report });
    }
  });
});
