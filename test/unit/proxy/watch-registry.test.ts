import { describe, expect, it } from 'vitest';
import { RouteState } from '../../../src/proxy/routes/route-state.js';
import type { ClusterLink } from '../../../src/proxy/upstream/index.js';
import type { ClusterShardView } from '../../../src/proxy/routes/shard-view.js';
import type { EndReason } from '../../../src/proxy/routes/open-streams.js';
import { WatchRegistry, endReason, type OpenWatch } from '../../../src/proxy/routes/watch-registry.js';
import type { ClusterRoute } from '../../../src/transport/index.js';
import { clusterFixture, routeTableFixture, continueTokensFixture } from './route-table-fixture.js';

const link = (): ClusterLink => ({}) as ClusterLink;
const tierWeb = [{ relateResources: [{ apiGroups: [''], resources: ['pods'] }], selector: { matchLabels: { tier: 'web' } } }];

function state(clusters: ClusterRoute[], fenced = false): RouteState {
  return new RouteState({ table: routeTableFixture({ hashAlgorithm: 'fnv-range', clusters: [clusterFixture('a', []), ...clusters.filter((c) => c.name !== 'a')] }), fenced, continueTokens: continueTokensFixture, link });
}

function watch(s: RouteState, cluster: string, resource: string, log: string[]): OpenWatch & { views: ClusterShardView[] } {
  const views: ClusterShardView[] = [];
  return {
    cluster,
    group: '',
    resource,
    carries: s.clusters.get(cluster)!.view.carries('', resource),
    expire: () => log.push(`${cluster}/${resource}`),
    retarget: (view) => views.push(view),
    views,
  };
}

describe('WatchRegistry', () => {
  it('ends a watch only when the new table revokes what it carries; grants end it too, other changes retarget it', () => {
    for (const selection of [undefined, 'shardSelector', 'proxyFilter'] as const) {
      const b = (buckets: number[], limits = tierWeb) => clusterFixture('b', buckets, { selection, limits });
      const first = state([b([1, 2]), clusterFixture('c', [7])]);
      const registry = new WatchRegistry();
      const ended: [string, EndReason][] = [];
      const onEnded = (w: OpenWatch, reason: EndReason): number => ended.push([`${w.cluster}/${w.resource}`, reason]);
      const expired: string[] = [];
      const pods = watch(first, 'b', 'pods', expired);
      const configmaps = watch(first, 'b', 'configmaps', expired);
      const other = watch(first, 'c', 'configmaps', expired);
      for (const w of [pods, configmaps, other]) registry.add(w, first, onEnded);
      expect(registry.size).toBe(3);

      // Only cluster c changes: b's watches stay and are judged by the new table.
      const second = state([b([1, 2]), clusterFixture('c', [7, 8])]);
      registry.reconcile(second, onEnded);
      expect(ended).toEqual([['c/configmaps', 'granted']]);
      expect(pods.views.at(-1)).toBe(second.clusters.get('b')!.view);
      expect(pods.carries).toBe(second.clusters.get('b')!.view.carries('', 'pods'));

      // pods' limit changes (taken as revoking), configmaps' does not apply to them: only pods end.
      const third = state([b([1, 2], [{ ...tierWeb[0]!, selector: { matchLabels: { tier: 'db' } } }])]);
      registry.reconcile(third, onEnded);
      expect(ended.slice(1)).toEqual([['b/pods', 'reassigned']]);

      // A bucket revoked.
      registry.reconcile(state([b([1])]), onEnded);
      expect(ended.slice(2)).toEqual([['b/configmaps', 'reassigned']]);
      expect(registry.size).toBe(0);
      expect(expired.sort()).toEqual(['b/configmaps', 'b/pods', 'c/configmaps']);
    }
  });

  it('names the reason: cluster removed, fenced, revoked, granted; nothing for the same units', () => {
    const before = state([clusterFixture('b', [1, 2])]);
    const w = watch(before, 'b', 'configmaps', []);
    expect(endReason(state([]), w)).toBe('cluster-removed');
    expect(endReason(state([clusterFixture('b', [1, 2])], true), w)).toBe('fenced');
    expect(endReason(state([clusterFixture('b', [2, 3])]), w)).toBe('reassigned');
    expect(endReason(state([clusterFixture('b', [1, 2, 3])]), w)).toBe('granted');
    expect(endReason(state([clusterFixture('b', [1, 2])]), w)).toBeUndefined();
    // How the cluster selects is part of what a selector carries.
    expect(endReason(state([clusterFixture('b', [1, 2], { selection: 'shardSelector' })]), w)).toBe('reassigned');
    // A watch that owned nothing loses nothing when fenced.
    expect(endReason(state([clusterFixture('b', [])], true), watch(state([clusterFixture('b', [])]), 'b', 'configmaps', []))).toBeUndefined();
  });

  it('holds a watch judged under an earlier table to the current one when it registers', () => {
    const before = state([clusterFixture('b', [1, 2])]);
    const registry = new WatchRegistry();
    const ended: EndReason[] = [];
    const expired: string[] = [];
    const late = watch(before, 'b', 'configmaps', expired);
    registry.add(late, state([clusterFixture('b', [2])]), (_, reason) => ended.push(reason));
    expect(expired).toEqual(['b/configmaps']);
    expect(ended).toEqual(['reassigned']);
    expect(registry.size).toBe(0);
    const now = state([clusterFixture('b', [1, 2])]);
    const kept = watch(before, 'b', 'configmaps', expired);
    registry.add(kept, now, (_, reason) => ended.push(reason));
    expect(registry.size).toBe(1);
    expect(kept.views).toEqual([now.clusters.get('b')!.view]);
  });
});
