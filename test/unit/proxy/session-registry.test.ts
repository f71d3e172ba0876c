import { describe, expect, it } from 'vitest';
import { decide } from '../../../src/proxy/request/judgement/enforce.js';
import { isRefusal, parseApiRequest } from '../../../src/proxy/request/parse/index.js';
import { RouteState } from '../../../src/proxy/routes/route-state.js';
import type { ClusterLink } from '../../../src/proxy/upstream/index.js';
import { SessionRegistry, type OpenSession } from '../../../src/proxy/routes/session-registry.js';
import type { EndReason } from '../../../src/proxy/routes/open-streams.js';
import { bucketOf } from '../../../src/sharding/index.js';
import type { ClusterRoute } from '../../../src/transport/index.js';
import { clusterFixture, routeTableFixture, continueTokensFixture } from './route-table-fixture.js';

const link = (): ClusterLink => ({}) as ClusterLink;
const state = (clusters: ClusterRoute[], fenced = false): RouteState =>
  new RouteState({ table: routeTableFixture({ clusters: [clusterFixture('a', []), ...clusters] }), fenced, continueTokens: continueTokensFixture, link });

describe('SessionRegistry', () => {
  it('ends a session only when its own namespace is no longer the shard\'s: revoked, fenced, or its cluster removed', () => {
    const first = state([clusterFixture('b', [1, 2, 3])]);
    const table = first.table;
    // A namespace of each of buckets 1 and 2 under the table's hash.
    const namespaceIn = (bucket: number): string => {
      for (let i = 0; ; i++) if (bucketOf(`ns-${i}`, { algorithm: table.hashAlgorithm, bucketCount: table.bucketCount }) === bucket) return `ns-${i}`;
    };
    const ended: string[] = [];
    const reasons: EndReason[] = [];
    const registry = new SessionRegistry();
    // As the upgrade path registers one: the judgement of its exec request, made again.
    const session = (namespace: string): OpenSession => {
      const parsed = parseApiRequest('POST', `/api/v1/namespaces/${namespace}/pods/p/exec?command=sh`);
      if (isRefusal(parsed)) throw new Error(parsed.message);
      return { cluster: 'b', admittedBy: (view, shard) => decide(parsed.info, view, shard).kind !== 'deny', end: () => ended.push(namespace) };
    };
    const onEnded = (_session: OpenSession, reason: EndReason): void => void reasons.push(reason);
    const [one, two] = [namespaceIn(1), namespaceIn(2)];
    registry.add(session(one), first, onEnded);
    registry.add(session(two), first, onEnded);

    // Granting another bucket and revoking bucket 3 leave both sessions be.
    registry.reconcile(state([clusterFixture('b', [1, 2, 4])]), onEnded);
    expect(ended).toEqual([]);
    // Revoking bucket 2 ends the session in its namespace only.
    registry.reconcile(state([clusterFixture('b', [1, 4])]), onEnded);
    expect([ended, reasons]).toEqual([[two], ['reassigned']]);
    expect(registry.size).toBe(1);
    // Fenced: ended as such.
    registry.reconcile(state([clusterFixture('b', [1, 4])], true), onEnded);
    expect([ended, reasons]).toEqual([[two, one], ['reassigned', 'fenced']]);
    expect(registry.size).toBe(0);

    // Registered under a table that no longer serves it: ended at once; a removed cluster says so.
    registry.add(session(one), state([]), onEnded);
    expect([ended.at(-1), reasons.at(-1)]).toEqual([one, 'cluster-removed']);
    expect(registry.size).toBe(0);
  });
});
