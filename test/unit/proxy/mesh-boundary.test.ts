import { describe, expect, it } from 'vitest';
import { isRefused, judgeBody, judgeRequest, type Judgement, type RequestHead } from '../../../src/proxy/request/judgement/judge.js';
import { filterListBody } from '../../../src/proxy/request/answer/list-filter.js';
import { RouteState } from '../../../src/proxy/routes/route-state.js';
import type { ClusterLink } from '../../../src/proxy/upstream/index.js';
import { bucketOf } from '../../../src/sharding/index.js';
import { clusterFixture, continueTokensFixture, routeTableFixture } from './route-table-fixture.js';

// The shard owns the bucket of the operator's namespace "op" and of "ns-a"; "ns-b" is another shard's.
const OP_BUCKET = bucketOf('op', { algorithm: 'kusionstack', bucketCount: 32 });
const A_BUCKET = bucketOf('ns-a', { algorithm: 'kusionstack', bucketCount: 32 });
const link = (): ClusterLink => ({}) as ClusterLink;
const stateWith = (route: Parameters<typeof clusterFixture>[2] = {}): RouteState =>
  new RouteState({
    table: routeTableFixture({ operator: 'op/demo', leaderElectionName: 'demo-leader', clusters: [clusterFixture('a', [OP_BUCKET, A_BUCKET], route)] }),
    fenced: false,
    continueTokens: continueTokensFixture,
    link,
  });
const served = stateWith();
const allowed = stateWith({ unshardedWrites: [{ apiGroups: ['rbac.authorization.k8s.io'], resources: ['clusterrolebindings'] }, { apiGroups: [''], resources: ['serviceaccounts/token'] }] });

const head = (method: string, url: string, extra: Partial<RequestHead> = {}): RequestHead => ({ method, url, hasBody: false, ...extra });
const json = (method: string, url: string): RequestHead => head(method, url, { hasBody: true, contentType: 'application/json' });

function outcome(judged: Judgement): string {
  if (isRefused(judged)) return `${judged.status.code} ${judged.status.reason}`;
  const how = judged.objectWrite ? 'read first' : judged.read ? `read ${judged.read}` : judged.answer;
  return `forward ${how}`;
}

const judge = (request: RequestHead, state = served): string => outcome(judgeRequest(state, request, 'plain'));

/** The judgement of a create once its body is read. */
function created(request: RequestHead, body: Buffer | string, state = served): string {
  const first = judgeRequest(state, request, 'plain');
  if (isRefused(first) || first.read !== 'created') return `not read: ${outcome(first)}`;
  return outcome(judgeBody(first, Buffer.isBuffer(body) ? body : Buffer.from(body), request));
}

describe('the operator\'s namespace: the mesh\'s credentials and pods, whatever the shard owns', () => {
  it.each([
    ['GET', '/api/v1/namespaces/op/secrets/ctrlmesh-proxy'],
    ['GET', '/api/v1/namespaces/op/secrets/ctrlmesh-proxy.a.demo-2-normal'],
    ['PUT', '/api/v1/namespaces/op/secrets/ctrlmesh-proxy'],
    ['DELETE', '/api/v1/namespaces/op/secrets/ctrlmesh-proxy'],
    ['DELETE', '/api/v1/namespaces/op/secrets'],
    ['POST', '/api/v1/namespaces/op/pods'],
    ['POST', '/apis/apps/v1/namespaces/op/deployments'],
    ['PATCH', '/apis/apps/v1/namespaces/op/statefulsets/demo'],
    ['POST', '/apis/batch/v1/namespaces/op/jobs'],
    ['POST', '/api/v1/namespaces/op/pods/demo-0/exec?command=cat'],
    ['GET', '/api/v1/namespaces/op/pods/demo-0/proxy/metrics'],
    ['PATCH', '/api/v1/namespaces/op/pods/demo-0/ephemeralcontainers'],
    ['POST', '/apis/rbac.authorization.k8s.io/v1/namespaces/op/rolebindings'],
    ['DELETE', '/api/v1/secrets'],
    ['DELETE', '/api/v1/pods'],
    ['PUT', '/apis/ctrlmesh.kusionstack.io/v1alpha1/namespaces/op/shardingconfigs/demo'],
    ['POST', '/apis/ctrlmesh.kusionstack.io/v1alpha1/namespaces/ns-a/circuitbreakers'],
  ])('%s %s is refused 403', (method, url) => {
    expect(judge(head(method, url))).toBe('403 Forbidden');
  });

  it('leaves the rest of the namespace to its bucket: other Secrets, ConfigMaps, reads of pods and Deployments', () => {
    expect(judge(head('GET', '/api/v1/namespaces/op/secrets/webhook-cert'))).toBe('forward plain');
    expect(judge(head('PUT', '/api/v1/namespaces/op/configmaps/settings'))).toBe('forward plain');
    expect(judge(head('GET', '/api/v1/namespaces/op/pods/demo-0'))).toBe('forward plain');
    expect(judge(head('GET', '/apis/apps/v1/namespaces/op/deployments'))).toBe('forward plain');
    // The same names in another owned namespace are ordinary objects.
    expect(judge(head('GET', '/api/v1/namespaces/ns-a/secrets/ctrlmesh-proxy'))).toBe('forward plain');
    expect(judge(head('POST', '/api/v1/namespaces/ns-a/pods/p/exec?command=sh'))).toBe('forward plain');
  });

  it('hides the mesh Secrets from lists and watches of Secrets', () => {
    expect(judge(head('GET', '/api/v1/namespaces/op/secrets'))).toBe('forward list');
    expect(judge(head('GET', '/api/v1/secrets?watch=true'))).toBe('forward filtered-watch');
  });

  it('reads every Secret create: no token Secret anywhere, no mesh name in the operator\'s namespace (JSON and protobuf)', () => {
    const post = (ns: string): RequestHead => json('POST', `/api/v1/namespaces/${ns}/secrets`);
    expect(created(post('ns-a'), '{"metadata":{"name":"x"},"type":"kubernetes.io/service-account-token"}')).toBe('403 Forbidden');
    expect(created(post('ns-a'), '{"metadata":{"name":"x"},"type":"Opaque"}')).toBe('forward plain');
    expect(created(post('op'), '{"metadata":{"name":"ctrlmesh-proxy"}}')).toBe('403 Forbidden');
    expect(created(post('op'), '{"metadata":{"generateName":"ctrlmesh-proxy."}}')).toBe('403 Forbidden');
    expect(created(post('op'), '{"metadata":{"name":"webhook-cert"}}')).toBe('forward plain');
    // Duplicate keys: JSON.parse keeps the last, as the API server's decoder does.
    expect(created(post('ns-a'), '{"type":"Opaque","metadata":{"name":"x"},"type":"kubernetes.io/service-account-token"}')).toBe('403 Forbidden');
    expect(created(head('POST', '/api/v1/namespaces/ns-a/secrets', { hasBody: true, contentType: 'application/yaml' }), 'type: x')).toBe('415 UnsupportedMediaType');
    // client-go's protobuf: Unknown.raw = Secret{metadata{name}, type}.
    const field = (n: number, v: Buffer): Buffer => Buffer.concat([Buffer.from([(n << 3) | 2, v.length]), v]);
    const secret = (name: string, type: string): Buffer =>
      Buffer.concat([Buffer.from('k8s\0', 'latin1'), field(2, Buffer.concat([field(1, field(1, Buffer.from(name))), field(3, Buffer.from(type))]))]);
    const proto = (ns: string): RequestHead => head('POST', `/api/v1/namespaces/${ns}/secrets`, { hasBody: true, contentType: 'application/vnd.kubernetes.protobuf' });
    expect(created(proto('ns-a'), secret('x', 'kubernetes.io/service-account-token'))).toBe('403 Forbidden');
    expect(created(proto('op'), secret('ctrlmesh-proxy', 'Opaque'))).toBe('403 Forbidden');
    expect(created(proto('ns-a'), secret('x', 'Opaque'))).toBe('forward plain');
  });
});

describe('cluster-scoped objects', () => {
  it.each([
    ['POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings'],
    ['PUT', '/apis/rbac.authorization.k8s.io/v1/clusterroles/admin'],
    ['POST', '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations'],
    ['POST', '/apis/admissionregistration.k8s.io/v1beta1/mutatingadmissionpolicies'],
    ['POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions'],
    ['POST', '/apis/apiregistration.k8s.io/v1/apiservices'],
    ['POST', '/api/v1/nodes'],
    ['PATCH', '/api/v1/nodes/n1/status'],
    ['POST', '/api/v1/persistentvolumes'],
    ['PUT', '/apis/certificates.k8s.io/v1/certificatesigningrequests/c/approval'],
    ['DELETE', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings'],
    ['POST', '/api/v1/namespaces/ns-a/serviceaccounts/default/token'],
    ['POST', '/api/v1/namespaces/op/serviceaccounts/demo/token'],
  ])('%s %s is refused 403 unless the ShardingConfig names it', (method, url) => {
    expect(judge(head(method, url))).toBe('403 Forbidden');
  });

  it('lets spec.unshardedWrites name a kind, or serviceaccounts/token, and nothing more', () => {
    expect(judge(head('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings'), allowed)).toBe('forward plain');
    expect(judge(head('POST', '/api/v1/namespaces/ns-a/serviceaccounts/default/token'), allowed)).toBe('forward plain');
    expect(judge(head('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles'), allowed)).toBe('403 Forbidden');
    // Another shard's namespace stays another shard's.
    expect(judge(head('POST', '/api/v1/namespaces/ns-b/serviceaccounts/default/token'), allowed)).toBe('403 Forbidden');
  });

  it('reads built-in kinds, and passes reviews, which write nothing', () => {
    expect(judge(head('GET', '/api/v1/nodes'))).toBe('forward plain');
    expect(judge(head('GET', '/apis/rbac.authorization.k8s.io/v1/clusterroles/admin'))).toBe('forward plain');
    expect(judge(head('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews'))).toBe('forward plain');
    expect(judge(head('POST', '/apis/authentication.k8s.io/v1/tokenreviews'))).toBe('forward plain');
    // Only created: a review is never stored, so any other write is no review.
    expect(judge(head('DELETE', '/apis/authentication.k8s.io/v1/tokenreviews/x'))).toBe('403 Forbidden');
    expect(judge(head('GET', '/api/v1/namespaces'))).toBe('forward plain');
  });

  it('judges one custom object outside namespaces as its list: from the answer, after a read, by the body', () => {
    expect(judge(head('GET', '/apis/example.io/v1/clusterwidgets'))).toBe('forward plain');
    expect(judge(head('GET', '/apis/example.io/v1/clusterwidgets/w'))).toBe('forward object');
    expect(judge(head('PATCH', '/apis/example.io/v1/clusterwidgets/w'))).toBe('forward read first');
    expect(judge(head('PUT', '/apis/example.io/v1/clusterwidgets/w/status'))).toBe('forward read first');
    expect(judge(head('DELETE', '/apis/example.io/v1/clusterwidgets/w'))).toBe('forward read first');
    expect(judge(head('PUT', '/apis/example.io/v1/clusterwidgets/w/scale'))).toBe('403 Forbidden');
    const post = json('POST', '/apis/example.io/v1/clusterwidgets');
    expect(created(post, `{"metadata":{"name":"w","labels":{"h":"${A_BUCKET}"}}}`)).toBe('forward plain');
    expect(created(post, `{"metadata":{"name":"w","labels":{"h":"${(A_BUCKET + 1) % 32 === OP_BUCKET ? (A_BUCKET + 2) % 32 : (A_BUCKET + 1) % 32}"}}}`)).toBe('403 Forbidden');
    expect(created(post, '{"metadata":{"name":"w"}}')).toBe('403 Forbidden');
    expect(created(head('POST', '/apis/example.io/v1/clusterwidgets', { hasBody: true, contentType: 'application/yaml' }), 'metadata: {}')).toBe('415 UnsupportedMediaType');
    expect(judge(head('POST', '/apis/example.io/v1/clusterwidgets'))).toBe('400 BadRequest');
    // No answer to judge a HEAD by; no update or patch of a collection.
    expect(judge(head('HEAD', '/apis/example.io/v1/clusterwidgets/w'))).toBe('405 MethodNotAllowed');
    expect(judge(head('PATCH', '/apis/example.io/v1/clusterwidgets'))).toBe('405 MethodNotAllowed');
    expect(judge(head('PUT', '/api/v1/secrets'))).toBe('405 MethodNotAllowed');
  });
});

describe('continue tokens of lists the proxy filters', () => {
  const proxyFiltered = stateWith({ selection: 'proxyFilter' });

  it('are sealed in the answer, opened for the API server, and 410 Expired when forged or sent to another list', () => {
    const list = judgeRequest(proxyFiltered, head('GET', '/api/v1/configmaps?limit=2'), 'plain');
    if (isRefused(list)) throw new Error('refused');
    expect(list.answer).toBe('list');
    const server = Buffer.from('{"v":"meta.k8s.io/v1","rv":5,"start":"ns-b/secret-name\\u0000"}').toString('base64');
    const bound = `a\n${list.path}`;
    const answer = JSON.parse(
      filterListBody(JSON.stringify({ kind: 'ConfigMapList', metadata: { continue: server, remainingItemCount: 3 }, items: [] }), () => true, (t) => continueTokensFixture.seal(t, bound)),
    ) as { metadata: { continue: string; remainingItemCount?: number } };
    expect(answer.metadata.remainingItemCount).toBeUndefined();
    expect(answer.metadata.continue).not.toContain(server);
    expect(Buffer.from(answer.metadata.continue, 'base64url').toString('latin1')).not.toContain('ns-b');

    const next = judgeRequest(proxyFiltered, head('GET', `/api/v1/configmaps?limit=2&continue=${encodeURIComponent(answer.metadata.continue)}`), 'plain');
    if (isRefused(next)) throw new Error('refused');
    expect(next.query.get('continue')).toBe(server);

    const elsewhere = judgeRequest(proxyFiltered, head('GET', `/api/v1/secrets?limit=2&continue=${encodeURIComponent(answer.metadata.continue)}`), 'plain');
    expect(outcome(elsewhere)).toBe('410 Expired');
    const forged = judgeRequest(proxyFiltered, head('GET', `/api/v1/configmaps?continue=${encodeURIComponent(`${answer.metadata.continue.slice(0, -2)}AA`)}`), 'plain');
    expect(outcome(forged)).toBe('410 Expired');
    // The API server's own tokens (of lists it filtered itself) pass as they are.
    const plain = judgeRequest(proxyFiltered, head('GET', `/api/v1/configmaps?continue=${server}`), 'plain');
    expect(isRefused(plain) ? '' : plain.query.get('continue')).toBe(server);
  });
});
