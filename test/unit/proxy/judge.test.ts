import { describe, expect, it } from 'vitest';
import { isRefused, judgeBody, judgeRequest, type Judgement, type RequestHead, type Way } from '../../../src/proxy/request/judgement/judge.js';
import { RouteState } from '../../../src/proxy/routes/route-state.js';
import type { ClusterLink } from '../../../src/proxy/upstream/index.js';
import { clusterFixture, routeTableFixture, continueTokensFixture } from './route-table-fixture.js';

// KusionStack hash vectors: ns-a -> 15, ns-b -> 16.
const OWNED = 'ns-a';
const UNOWNED = 'ns-b';
const link = (): ClusterLink => ({}) as ClusterLink;
const served = new RouteState({
  table: routeTableFixture({ operator: 'op/demo', leaderElectionName: 'demo-leader', clusters: [clusterFixture('a', [15], { bucketOwners: { '16': 's2' } }), clusterFixture('b', [])] }),
  fenced: false,
  continueTokens: continueTokensFixture,
  link,
});
const fenced = new RouteState({ table: served.table, fenced: true, continueTokens: continueTokensFixture, link });

/** What a judgement comes to, in the terms a client sees: the Status it gets, or what is sent. */
function outcome(judged: Judgement): string {
  if (isRefused(judged)) return `${judged.status.code} ${judged.status.reason}${judged.retryAfterSeconds === undefined ? '' : ` retry ${judged.retryAfterSeconds}`}`;
  return `forward ${judged.cluster} ${judged.path}${judged.read ? ` read ${judged.read}` : ''} ${judged.answer}${judged.lock ? ' lock' : ''}`;
}

const head = (method: string, url: string, extra: Partial<RequestHead> = {}): RequestHead => ({ method, url, hasBody: false, ...extra });
const exec = (namespace: string, cluster = ''): string => `${cluster}/api/v1/namespaces/${namespace}/pods/p/exec?command=sh`;

describe('judgeRequest: one judgement for every way in', () => {
  // [case, route state, way, head, outcome]
  const cases: [string, RouteState | undefined, Way, RequestHead, string][] = [
    ['no table yet: plain', undefined, 'plain', head('GET', `/api/v1/namespaces/${OWNED}/configmaps`), '503 ServiceUnavailable retry 1'],
    ['no table yet: watch', undefined, 'watch', head('GET', `/api/v1/namespaces/${OWNED}/configmaps?watch=1`), '503 ServiceUnavailable retry 1'],
    ['no table yet: upgrade', undefined, 'upgrade', head('POST', exec(OWNED), { upgrade: 'SPDY/3.1' }), '503 ServiceUnavailable retry 1'],
    ['fenced: plain', fenced, 'plain', head('GET', `/api/v1/namespaces/${OWNED}/configmaps`), '503 ServiceUnavailable retry 1'],
    ['fenced: watch', fenced, 'watch', head('GET', `/api/v1/namespaces/${OWNED}/configmaps?watch=1`), '503 ServiceUnavailable retry 1'],
    ['fenced: upgrade', fenced, 'upgrade', head('POST', exec(OWNED), { upgrade: 'SPDY/3.1' }), '503 ServiceUnavailable retry 1'],
    ['fenced: the shard\'s own lock is still served', fenced, 'plain', head('GET', '/apis/coordination.k8s.io/v1/namespaces/op/leases/demo-leader'), 'forward a /apis/coordination.k8s.io/v1/namespaces/op/leases/demo-leader.s1-'],
    ['unknown cluster: plain', served, 'plain', head('POST', exec(OWNED, '/clusters/nope')), '404 NotFound'],
    ['unknown cluster: watch', served, 'watch', head('GET', `/clusters/nope/api/v1/namespaces/${OWNED}/configmaps?watch=1`), '404 NotFound'],
    ['unknown cluster: upgrade', served, 'upgrade', head('POST', exec(OWNED, '/clusters/nope'), { upgrade: 'SPDY/3.1' }), '404 NotFound'],
    ['unparsable target: plain', served, 'plain', head('GET', '/api/v1/nodes/n1/proxy/pods'), '403 Forbidden'],
    ['unparsable target: upgrade', served, 'upgrade', head('GET', '/api/v1/nodes/n1/proxy/pods', { upgrade: 'websocket' }), '403 Forbidden'],
    ['another shard\'s namespace: write', served, 'plain', head('POST', exec(UNOWNED)), '403 Forbidden'],
    ['another shard\'s namespace: exec upgraded', served, 'upgrade', head('POST', exec(UNOWNED), { upgrade: 'SPDY/3.1' }), '403 Forbidden'],
    ['another shard\'s namespace: read', served, 'plain', head('GET', `/api/v1/namespaces/${UNOWNED}/configmaps/x`), '404 NotFound'],
    ['own namespace: exec upgraded', served, 'upgrade', head('POST', exec(OWNED), { upgrade: 'SPDY/3.1' }), `forward a /api/v1/namespaces/${OWNED}/pods/p/exec plain`],
    ['own namespace: read', served, 'plain', head('GET', `/api/v1/namespaces/${OWNED}/configmaps/x`), `forward a /api/v1/namespaces/${OWNED}/configmaps/x plain`],
    ['sharded watch', served, 'watch', head('GET', '/api/v1/configmaps?watch=1'), 'forward a /api/v1/configmaps filtered-watch'],
    ['sharded watch on the plain way', served, 'plain', head('GET', '/api/v1/configmaps?watch=1'), 'forward a /api/v1/configmaps filtered-watch'],
    ['an upgrade other than exec, attach, port-forward', served, 'upgrade', head('GET', '/api/v1/configmaps?watch=1', { upgrade: 'h2c' }), '400 BadRequest'],
    ['an upgrade with a body', served, 'upgrade', head('POST', exec(OWNED), { upgrade: 'SPDY/3.1', hasBody: true }), '400 BadRequest'],
    ['a lock create: its body is read', served, 'plain', head('POST', '/apis/coordination.k8s.io/v1/namespaces/op/leases', { hasBody: true, contentType: 'application/json' }), 'forward a /apis/coordination.k8s.io/v1/namespaces/op/leases read lock plain'],
    ['a Namespace create not sent as JSON', served, 'plain', head('POST', '/api/v1/namespaces', { hasBody: true, contentType: 'application/yaml' }), '415 UnsupportedMediaType'],
  ];

  it.each(cases)('%s', (_name, state, way, request, expected) => {
    expect(outcome(judgeRequest(state, request, way))).toMatch(new RegExp(`^${expected.replace(/[.*+?^${}()|[\]\\]/gu, '\\$&')}`, 'u'));
  });

  it('finishes a body it had to read: the lock renamed, another shard\'s lock refused, a Namespace by its own bucket', () => {
    const lockHead = head('POST', '/apis/coordination.k8s.io/v1/namespaces/op/leases', { hasBody: true, contentType: 'application/json' });
    const lock = judgeRequest(served, lockHead, 'plain');
    if (isRefused(lock)) throw new Error('the lock create was refused');
    const renamed = judgeBody(lock, Buffer.from('{"metadata":{"name":"demo-leader"}}'), lockHead);
    expect(outcome(renamed)).toBe('forward a /apis/coordination.k8s.io/v1/namespaces/op/leases lock lock');
    expect(String(isRefused(renamed) ? '' : renamed.body)).toMatch(/"name":"demo-leader\.s1-[0-9a-f]{10}"/u);
    const nsHead = head('POST', '/api/v1/namespaces', { hasBody: true, contentType: 'application/json' });
    const create = judgeRequest(served, nsHead, 'plain');
    if (isRefused(create)) throw new Error('the Namespace create was refused');
    expect(outcome(judgeBody(create, Buffer.from(`{"metadata":{"name":"${OWNED}"}}`), nsHead))).toBe('forward a /api/v1/namespaces plain');
    expect(outcome(judgeBody(create, Buffer.from(`{"metadata":{"name":"${UNOWNED}"}}`), nsHead))).toBe('403 Forbidden');
  });
});
