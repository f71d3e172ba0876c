import { describe, expect, it } from 'vitest';
import { ClusterShardView, decide, isRefusal, parseApiRequest, type RequestInfo } from '../../../src/proxy/index.js';
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
function infoOf(method: string, target: string): RequestInfo {
  const parsed = parseApiRequest(method, target);
  if (isRefusal(parsed)) throw new Error(`refused: ${parsed.message}`);
  return parsed.info;
}
const request = (method: string, path: string, query = '') => decide(infoOf(method, query === '' ? path : `${path}?${query}`), view, 's1');
const HASH = 'ctrlmesh.kusionstack.io/shard-hash';

describe('decide', () => {
  it('injects the owned buckets into lists and watches, AND the limits for the resources they name', () => {
    expect(request('GET', '/api/v1/configmaps')).toEqual({ kind: 'forward', sharded: true });
    expect(view.selectorFor('', 'configmaps')).toBe(`${HASH} in (15,3)`);
    expect(request('GET', '/api/v1/namespaces/ns-b/pods', 'watch=1')).toEqual({ kind: 'forward', sharded: true });
    expect(view.selectorFor('', 'pods')).toBe(`app=foo,${HASH} in (15,3)`);
    expect(request('GET', '/api/v1/nodes')).toEqual({ kind: 'forward', sharded: true });
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
    expect(view.admits('', 'configmaps', { labels: { [HASH]: '15' } })).toBe(true);
    expect(view.admits('', 'configmaps', { labels: { [HASH]: '16' } })).toBe(false);
    expect(view.admits('', 'pods', { labels: { [HASH]: '15' } })).toBe(false);
    expect(view.admits('', 'pods', { labels: { [HASH]: '15', app: 'foo' } })).toBe(true);
  });

  it('gives a shard owning nothing a valid selector that matches nothing', () => {
    const empty = new ClusterShardView({ table, route: table.clusters[0]!, fenced: true });
    expect(empty.selectorFor('', 'configmaps')).toBe(`${HASH},!${HASH}`);
  });

  it('never weakens the client selector, and sends only what it parsed', () => {
    expect(view.selectorWith('', 'configmaps', undefined)).toBe(`${HASH} in (15,3)`);
    expect(view.selectorWith('', 'configmaps', 'app=x')).toBe(`app=x,${HASH} in (15,3)`);
    // A client asking for another shard's bucket gets a selector that matches nothing, not that bucket.
    expect(view.selectorWith('', 'configmaps', `${HASH}=16`)).toBe(`${HASH},!${HASH}`);
    expect(view.selectorWith('', 'configmaps', `!${HASH}`)).toBe(`${HASH},!${HASH}`);
    expect(view.selectorWith('', 'configmaps', `${HASH} notin (3)`)).toBe(`${HASH}=15`);
    // An unbalanced set would swallow text appended to it: refused, never concatenated.
    expect(() => view.selectorWith('', 'configmaps', 'app in (a')).toThrow(/expected/u);
  });

  it('gives a Namespace object the bucket of its own name', () => {
    expect(request('GET', '/api/v1/namespaces/ns-a')).toEqual({ kind: 'forward' });
    expect(request('GET', '/api/v1/namespaces/ns-b')).toMatchObject({ kind: 'deny', body: { code: 404 } });
    expect(request('DELETE', '/api/v1/namespaces/ns-b')).toMatchObject({ kind: 'deny', body: { code: 403 } });
    expect(request('PATCH', '/api/v1/namespaces/ns-b')).toMatchObject({ kind: 'deny', body: { code: 403 } });
    expect(request('PUT', '/api/v1/namespaces/ns-b/finalize')).toMatchObject({ kind: 'deny', body: { code: 403 } });
    expect(request('PUT', '/api/v1/namespaces/ns-a/status')).toEqual({ kind: 'forward' });
    // A create names its namespace in the body: the handler fills it in; unnamed, it cannot be judged.
    expect(request('POST', '/api/v1/namespaces')).toMatchObject({ kind: 'deny', body: { code: 403 } });
    expect(request('DELETE', '/api/v1/namespaces')).toMatchObject({ kind: 'deny', body: { code: 403 } });
    expect(request('GET', '/api/v1/namespaces')).toEqual({ kind: 'forward' });
  });

  it('judges the pods and services proxy subresources by the namespace', () => {
    expect(request('GET', '/api/v1/namespaces/ns-b/pods/p/proxy/metrics')).toMatchObject({ kind: 'deny', body: { code: 404 } });
    expect(request('POST', '/api/v1/namespaces/ns-b/services/s:http/proxy/x')).toMatchObject({ kind: 'deny', body: { code: 403 } });
    expect(request('GET', '/api/v1/namespaces/ns-a/pods/p/proxy/metrics')).toEqual({ kind: 'forward' });
  });
});
