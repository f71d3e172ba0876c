import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ClusterShardView } from '../../../src/proxy/routes/shard-view.js';
import type { ClusterRoute } from '../../../src/transport/index.js';
import { clusterFixture, routeTableFixture } from './route-table-fixture.js';

const limits: ClusterRoute['limits'] = [
  { relateResources: [{ apiGroups: [''], resources: ['pods'] }], selector: { matchExpressions: [{ key: 'tier', operator: 'In', values: ['web'] }] } },
  { relateResources: [{ apiGroups: [''], resources: ['pods', 'configmaps'] }], selector: { matchExpressions: [{ key: 'n', operator: 'NotIn', values: ['ns-3'] }] } },
];

function view(selection: ClusterRoute['selection'], extra: Partial<ClusterRoute> = {}): ClusterShardView {
  const route = clusterFixture('a', [0, 2, 4, 6, 9, 17, 30], { selection, limits, ...extra });
  return new ClusterShardView({ table: routeTableFixture({ hashAlgorithm: 'fnv-range', clusters: [route] }), route, fenced: false });
}

describe('ClusterShardView.eventJudge', () => {
  it('judges an event by exactly what admits reads, and reads only its label keys', () => {
    const views = [view(undefined), view('shardSelector'), view('proxyFilter'), view('shardSelector', { objectSharding: [{ apiGroups: [''], resources: ['configmaps'] }] })];
    const metadata = fc.record({
      namespace: fc.option(fc.constantFrom('ns-1', 'ns-2', 'ns-3', 'kube-system'), { nil: undefined }),
      name: fc.option(fc.constantFrom('ns-1', 'ns-2', 'ns-3'), { nil: undefined }),
      uid: fc.option(fc.uuid(), { nil: undefined }),
      labels: fc.option(fc.dictionary(fc.constantFrom('h', 'n', 'c', 'tier', 'app', 'other'), fc.constantFrom('0', '2', '9', 'web', 'db', 'ns-3', 'true')), { nil: undefined }),
    });
    fc.assert(
      fc.property(fc.nat({ max: views.length - 1 }), fc.constantFrom('pods', 'configmaps', 'namespaces', 'secrets'), metadata, (which, resource, object) => {
        const v = views[which]!;
        const judge = v.eventJudge('', resource);
        expect(v.eventJudge('', resource)).toBe(judge);
        const seen = object.labels === undefined ? object : { ...object, labels: Object.fromEntries(Object.entries(object.labels).filter(([k]) => judge.labelKeys.includes(k))) };
        expect(judge.admits(seen)).toBe(v.admits('', resource, object));
      }),
      { numRuns: 2000 },
    );
  });

  it('leaves events unread only where the API server applies everything it checks: label selectors', () => {
    expect(view(undefined).eventJudge('', 'pods')).toMatchObject({ mustJudge: false, labelKeys: ['h', 'n', 'tier'] });
    expect(view(undefined).eventJudge('', 'secrets')).toMatchObject({ mustJudge: false, labelKeys: ['h'] });
    expect(view('shardSelector').selectionFor('', 'pods').shardSelector).toMatch(/^shardRange/);
    expect(view('shardSelector').eventJudge('', 'pods')).toMatchObject({ mustJudge: true, labelKeys: ['n', 'tier'] });
    expect(view('shardSelector').eventJudge('', 'namespaces').mustJudge).toBe(true);
    expect(view('proxyFilter').eventJudge('', 'secrets')).toMatchObject({ mustJudge: true, labelKeys: [] });
    expect(view(undefined, { objectSharding: [{ apiGroups: [''], resources: ['secrets'] }] }).eventJudge('', 'secrets').mustJudge).toBe(true);
  });
});
