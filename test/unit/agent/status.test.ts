import { describe, expect, it } from 'vitest';
import { shardingConfigStatus, statusChanged } from '../../../src/agent/sharding-status.js';
import { relatedResources } from '../../../src/agent/related.js';
import type { ShardingConfigModel } from '../../../src/api/index.js';
import { ROUTE_TABLE_SCHEMA_VERSION, type RouteTable } from '../../../src/transport/index.js';

const table: RouteTable = {
  schema: ROUTE_TABLE_SCHEMA_VERSION,
  operator: 'ns/op',
  shard: 'a/op',
  version: 3,
  issuedAt: '2026-01-01T00:00:00.000Z',
  homeCluster: 'a',
  hashAlgorithm: 'fnv',
  bucketCount: 32,
  labels: { hash: 'h', namespace: 'n', control: 'c' },
  leaseSeconds: 15,
  clusters: [{ name: 'a', server: 'https://x', caPem: '', buckets: [1, 2], limits: [] }],
};

describe('shardingConfigStatus', () => {
  const t0 = new Date('2026-01-01T00:00:00Z');
  const t1 = new Date('2026-01-01T00:01:00Z');

  it('accepts a valid config and lists the buckets each shard owns', () => {
    const status = shardingConfigStatus({ generation: 2, validation: { ok: true, model: {} as ShardingConfigModel }, routes: [table], previous: undefined, now: t0 });
    expect(status.observedGeneration).toBe(2);
    expect(status.conditions?.find((c) => c.type === 'Accepted')).toMatchObject({ status: 'True', lastTransitionTime: t0.toISOString() });
    expect(status.shards).toEqual([{ name: 'a/op', version: 3, clusters: [{ name: 'a', buckets: [1, 2] }] }]);
    // Same status later: the transition time stays.
    const again = shardingConfigStatus({ generation: 2, validation: { ok: true, model: {} as ShardingConfigModel }, routes: [table], previous: status, now: t1 });
    expect(again).toEqual(status);
    // As the API server returns it (keys sorted): still unchanged.
    const sorted = JSON.parse(JSON.stringify(status, Object.keys(status).sort().concat(['type', 'status', 'reason', 'message', 'lastTransitionTime', 'name', 'version', 'clusters', 'buckets'])));
    expect(statusChanged(sorted, again)).toBe(false);
    expect(statusChanged(sorted, { ...again, observedGeneration: 3 })).toBe(true);
  });

  it('marks an invalid config with every field at fault', () => {
    const status = shardingConfigStatus({
      generation: 3,
      validation: { ok: false, kind: 'ShardingConfig', name: 'op', problems: [{ path: 'spec.limits[0].selector', reason: 'bad' }] },
      routes: [table],
      previous: undefined,
      now: t1,
    });
    expect(status.conditions?.find((c) => c.type === 'Invalid')).toMatchObject({ status: 'True', message: 'spec.limits[0].selector: bad' });
    expect(status.conditions?.find((c) => c.type === 'Accepted')?.status).toBe('False');
  });
});

describe('relatedResources', () => {
  it('collects (group, resource) pairs from limits and root selectors, without namespaces or wildcards', () => {
    const config = {
      limits: [{ relateResources: [{ apiGroups: ['', 'apps'], resources: ['configmaps', 'namespaces', '*'] }], selector: {} }],
      root: { resourceSelector: [{ relateResources: [{ apiGroups: [], resources: ['pods'] }], selector: {} }] },
    } as unknown as ShardingConfigModel;
    expect(relatedResources([config])).toEqual([
      { group: '', resource: 'configmaps' },
      { group: '', resource: 'pods' },
      { group: 'apps', resource: 'configmaps' },
    ]);
  });
});
