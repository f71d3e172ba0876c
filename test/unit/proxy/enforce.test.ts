import { describe, expect, it } from 'vitest';
import { ClusterShardView, decide, withClientSelector, parseRequestInfo } from '../../../src/proxy/index.js';
import type { RouteTable } from '../../../src/transport/index.js';
import { clusterFixture, routeTableFixture } from './route-table-fixture.js';

// KusionStack hash vectors: ns-a -> 15, ns-b -> 16, default -> 5.
const table: RouteTable = routeTableFixture({
  labels: { hash: 'ctrlmesh.kusionstack.io/shard-hash', namespace: 'ctrlmesh.kusionstack.io/namespace', control: 'ctrlmesh.kusionstack.io/control' },
  clusters: [
    clusterFixture('a', [15, 3], {
      bucketOwners: { '16': 's2' },
      limits: [{ relateResources: [{ apiGroups: ['*'], resources: ['pods', 'nodes'] }], selector: { matchLabels: { app: 'foo' } } }],
    }),
  ],
});
const view = new ClusterShardView({ table, route: table.clusters[0]!, fenced: false });
const request = (method: string, path: string, query = '') => decide(parseRequestInfo(method, path, new URLSearchParams(query)), view, 's1');
const HASH = 'ctrlmesh.kusionstack.io/shard-hash';

describe('decide', () => {
  it('injects the owned buckets into lists and watches, AND the limits for the resources they name', () => {
    expect(request('GET', '/api/v1/configmaps')).toEqual({ kind: 'forward', labelSelector: `${HASH} in (15,3)`, filterWatch: false });
    expect(request('GET', '/api/v1/namespaces/ns-b/pods', 'watch=1')).toEqual({ kind: 'forward', labelSelector: `app=foo,${HASH} in (15,3)`, filterWatch: true });
    expect(request('GET', '/api/v1/nodes')).toEqual({ kind: 'forward', labelSelector: `app=foo,${HASH} in (15,3)`, filterWatch: false });
    expect(request('GET', '/api/v1/persistentvolumes')).toEqual({ kind: 'forward' });
    expect(request('GET', '/version')).toEqual({ kind: 'forward' });
  });

  it('answers 404 to reads and 403 naming the owner to writes outside the owned buckets', () => {
    expect(request('GET', '/api/v1/namespaces/ns-a/configmaps/x')).toEqual({ kind: 'forward' });
    const read = request('GET', '/api/v1/namespaces/ns-b/configmaps/x');
    expect(read).toMatchObject({ kind: 'deny', body: { code: 404, reason: 'NotFound', details: { name: 'x', kind: 'configmaps' } } });
    const write = request('PUT', '/api/v1/namespaces/ns-b/configmaps/x');
    expect(write).toMatchObject({ kind: 'deny', body: { code: 403, reason: 'Forbidden' } });
    expect(write.kind === 'deny' && write.body.message).toContain('belongs to shard "s2", not to shard "s1"');
    const unknownOwner = request('POST', '/api/v1/namespaces/default/configmaps');
    expect(unknownOwner.kind === 'deny' && unknownOwner.body.message).toContain('belongs to another shard');
  });

  it('admits watch events by hash label and limits', () => {
    expect(view.admits('', 'configmaps', { [HASH]: '15' })).toBe(true);
    expect(view.admits('', 'configmaps', { [HASH]: '16' })).toBe(false);
    expect(view.admits('', 'pods', { [HASH]: '15' })).toBe(false);
    expect(view.admits('', 'pods', { [HASH]: '15', app: 'foo' })).toBe(true);
  });

  it('gives a shard owning nothing a valid selector that matches nothing', () => {
    const empty = new ClusterShardView({ table, route: table.clusters[0]!, fenced: true });
    expect(empty.selectorFor('', 'configmaps')).toBe(`${HASH},!${HASH}`);
  });

  it('never weakens the client selector', () => {
    expect(withClientSelector(null, 'a in (1)')).toBe('a in (1)');
    expect(withClientSelector('app=x', 'a in (1)')).toBe('app=x,a in (1)');
  });
});
