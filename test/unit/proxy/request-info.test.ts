import { describe, expect, it } from 'vitest';
import { parseRequestInfo } from '../../../src/proxy/index.js';

const q = (s = ''): URLSearchParams => new URLSearchParams(s);

describe('parseRequestInfo', () => {
  it('reads core and group resources, namespaced and cluster-wide', () => {
    expect(parseRequestInfo('GET', '/api/v1/namespaces/ns-a/configmaps/cm1', q())).toMatchObject({
      kind: 'resource', verb: 'get', group: '', version: 'v1', resource: 'configmaps', namespace: 'ns-a', name: 'cm1',
    });
    expect(parseRequestInfo('GET', '/apis/apps/v1/deployments', q())).toMatchObject({ verb: 'list', group: 'apps', resource: 'deployments', namespace: undefined });
    expect(parseRequestInfo('GET', '/apis/apps/v1/deployments', q('watch=true'))).toMatchObject({ verb: 'watch' });
    expect(parseRequestInfo('GET', '/api/v1/watch/namespaces/ns-a/pods', q())).toMatchObject({ verb: 'watch', namespace: 'ns-a', resource: 'pods' });
  });

  it('maps methods to verbs and keeps subresources', () => {
    const path = '/apis/coordination.k8s.io/v1/namespaces/op/leases';
    expect(parseRequestInfo('POST', path, q())).toMatchObject({ verb: 'create', group: 'coordination.k8s.io', name: undefined });
    expect(parseRequestInfo('PUT', `${path}/lock`, q())).toMatchObject({ verb: 'update', name: 'lock' });
    expect(parseRequestInfo('PATCH', '/api/v1/namespaces/a/pods/p/status', q())).toMatchObject({ verb: 'patch', subresource: 'status' });
    expect(parseRequestInfo('DELETE', '/api/v1/namespaces/a/pods', q())).toMatchObject({ verb: 'deletecollection' });
    expect(parseRequestInfo('POST', '/api/v1/namespaces/a/pods/p/exec', q())).toMatchObject({ verb: 'create', subresource: 'exec' });
  });

  it('treats a Namespace object as cluster-scoped and non-resource paths as such', () => {
    expect(parseRequestInfo('GET', '/api/v1/namespaces/ns-a', q())).toMatchObject({ resource: 'namespaces', name: 'ns-a', namespace: undefined });
    expect(parseRequestInfo('GET', '/version', q())).toEqual({ kind: 'nonresource' });
    expect(parseRequestInfo('GET', '/apis', q())).toEqual({ kind: 'nonresource' });
    expect(parseRequestInfo('GET', '/apis/apps/v1', q())).toEqual({ kind: 'nonresource' });
  });
});
