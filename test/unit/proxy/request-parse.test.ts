import { describe, expect, it } from 'vitest';
import { isRefusal, parseApiRequest, type ApiRequest } from '../../../src/proxy/index.js';

function parsed(method: string, target: string): ApiRequest {
  const out = parseApiRequest(method, target);
  if (isRefusal(out)) throw new Error(`refused ${target}: ${out.message}`);
  return out;
}
const refusal = (method: string, target: string): number | undefined => {
  const out = parseApiRequest(method, target);
  return isRefusal(out) ? out.code : undefined;
};
const forwarded = (method: string, target: string): string => {
  const out = parsed(method, target);
  const query = out.query.toString();
  return `${out.path}${query === '' ? '' : `?${query}`}`;
};

describe('parseApiRequest: what the API server will execute', () => {
  it('reads core and group resources, namespaced and cluster-wide, as RequestInfoFactory does', () => {
    expect(parsed('GET', '/api/v1/namespaces/ns-a/configmaps/cm1').info).toEqual({
      kind: 'resource', verb: 'get', group: '', version: 'v1', resource: 'configmaps', subresource: undefined, namespace: 'ns-a', name: 'cm1',
    });
    expect(parsed('GET', '/apis/apps/v1/deployments').info).toMatchObject({ verb: 'list', group: 'apps', resource: 'deployments', namespace: undefined });
    expect(parsed('POST', '/apis/coordination.k8s.io/v1/namespaces/op/leases').info).toMatchObject({ verb: 'create', name: undefined });
    expect(parsed('PATCH', '/api/v1/namespaces/a/pods/p/status').info).toMatchObject({ verb: 'patch', subresource: 'status' });
    expect(parsed('DELETE', '/api/v1/namespaces/a/pods').info).toMatchObject({ verb: 'deletecollection' });
    expect(parsed('POST', '/api/v1/namespaces/a/pods/p/exec').info).toMatchObject({ verb: 'create', subresource: 'exec' });
    // A Namespace object's namespace is its name, and status/finalize are its subresources.
    expect(parsed('GET', '/api/v1/namespaces/ns-a').info).toMatchObject({ resource: 'namespaces', name: 'ns-a', namespace: 'ns-a' });
    expect(parsed('PUT', '/api/v1/namespaces/ns-a/finalize').info).toMatchObject({ resource: 'namespaces', name: 'ns-a', subresource: 'finalize', namespace: 'ns-a' });
    expect(parsed('GET', '/clusters/b/api/v1/pods').cluster).toBe('b');
  });

  it('decodes the path as the API server does and forwards the decoded form, never the raw one', () => {
    expect(parsed('GET', '/api/v1/n%61mespaces/victim/secrets').info).toMatchObject({ verb: 'list', namespace: 'victim', resource: 'secrets' });
    expect(parsed('GET', '/api/v1/namespaces/%76%69c%74im/configmaps/x').info).toMatchObject({ namespace: 'victim', name: 'x' });
    expect(forwarded('GET', '/api/v1/namespaces/%76%69c%74im/configmaps/x')).toBe('/api/v1/namespaces/victim/configmaps/x');
    expect(parsed('GET', '/%63lusters/b/api/v1/pods').cluster).toBe('b');
    expect(parsed('GET', '/api/v1/w%61tch/namespaces/victim/configmaps').info).toMatchObject({ verb: 'watch', namespace: 'victim' });
    expect(forwarded('GET', '/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Aadmin')).toBe('/apis/rbac.authorization.k8s.io/v1/clusterroles/system:admin');
  });

  it('forwards a path in one canonical form, whether the client escaped its characters or not', () => {
    // pchar text is its own encoding; any other printable character is escaped, sent raw or encoded alike.
    expect(forwarded('GET', "/api/v1/namespaces/a/configmaps/x-1.~_!$&'()*+,;=:@")).toBe("/api/v1/namespaces/a/configmaps/x-1.~_!$&'()*+,;=:@");
    for (const raw of ['x[1]', 'x"<>^`{|}\\', 'x%5B1%5D']) {
      const path = parsed('GET', `/api/v1/namespaces/a/configmaps/${raw}`).path;
      expect(path).toMatch(/^\/api\/v1\/namespaces\/a\/configmaps\/x(%[0-9A-F]{2}|1)+$/);
      expect(decodeURIComponent(path.split('/').at(-1)!)).toBe(decodeURIComponent(raw));
    }
  });

  it('refuses what the API server could read differently (400)', () => {
    for (const target of [
      '/api/v1/namespaces/victim%2Fconfigmaps%2Fx',
      '/api/v1/namespaces/own/configmaps/a%2F..%2F..%2Fvictim',
      '/api/v1/namespaces//configmaps',
      '/api/v1/namespaces/own/configmaps/',
      '/api/v1/namespaces/./configmaps',
      '/api/v1/namespaces/%2e%2e/configmaps',
      '/api/v1/namespaces/own/configmaps/x%00',
      '/api/v1/namespaces/own/configmaps/x%zz',
      '/api/v1/namespaces/own/configmaps/%C3',
      '/api/v1/configmaps?watch=true;labelSelector=x',
      '/api/v1/configmaps?labelSelector=%zz',
      '/api/v1/configmaps?labelSelector=a&labelSelector=b',
      '/api/v1/configmaps?watch=false&watch=true',
      '/api/v1/configmaps?fieldSelector=a&fieldSelector=b',
      '/api/v1/configmaps?watch=fal%C5%BFe',
      '/api/v1/configmaps#frag',
      'http://evil/api/v1/secrets',
      '*',
    ]) {
      expect({ target, code: refusal('GET', target) }).toEqual({ target, code: 400 });
    }
  });

  it('reads watch in every spelling the API server accepts', () => {
    for (const value of ['true', 'True', 'TRUE', '1', 'yes', '', 'x']) {
      expect(parsed('GET', `/api/v1/configmaps?watch=${value}`).info).toMatchObject({ verb: 'watch' });
    }
    expect(parsed('GET', '/api/v1/configmaps?watch').info).toMatchObject({ verb: 'watch' });
    expect(parsed('GET', '/api/v1/configmaps?w%61tch=true').info).toMatchObject({ verb: 'watch' });
    for (const value of ['false', 'FALSE', 'False', '0']) {
      expect(parsed('GET', `/api/v1/configmaps?watch=${value}`).info).toMatchObject({ verb: 'list' });
    }
    expect(forwarded('GET', '/api/v1/configmaps?watch=True')).toBe('/api/v1/configmaps?watch=true');
  });

  it('turns a watch of a named object into the collection watch with a name field selector', () => {
    expect(forwarded('GET', '/api/v1/namespaces/ns/configmaps/cm?watch=1')).toBe('/api/v1/namespaces/ns/configmaps?watch=true&fieldSelector=metadata.name%3Dcm');
    expect(forwarded('GET', '/api/v1/watch/namespaces/ns/configmaps/cm')).toBe('/api/v1/namespaces/ns/configmaps?fieldSelector=metadata.name%3Dcm&watch=true');
    expect(parsed('GET', '/api/v1/namespaces/ns/configmaps/cm?watch=1').info).toMatchObject({ verb: 'watch', namespace: 'ns', name: undefined });
    expect(refusal('GET', '/api/v1/namespaces/ns/configmaps/cm?watch=1&fieldSelector=metadata.name%3Dother')).toBe(400);
    expect(refusal('GET', '/api/v1/namespaces/ns/pods/p/log?watch=1')).toBe(400);
    // A named GET with watch=false is a GET.
    expect(parsed('GET', '/api/v1/namespaces/ns/configmaps/cm?watch=false').info).toMatchObject({ verb: 'get', name: 'cm' });
  });

  it('keeps pods and services proxy paths as resource requests and refuses node proxies and the /proxy/ prefix', () => {
    expect(parsed('GET', '/api/v1/namespaces/ns/pods/p/proxy/metrics/x').info).toMatchObject({ resource: 'pods', namespace: 'ns', subresource: 'proxy' });
    expect(parsed('GET', '/api/v1/namespaces/ns/services/s:80/proxy/').info).toMatchObject({ resource: 'services', subresource: 'proxy' });
    expect(refusal('GET', '/api/v1/nodes/n1/proxy/pods')).toBe(403);
    expect(refusal('GET', '/api/v1/proxy/namespaces/ns/pods/p')).toBe(404);
    expect(refusal('GET', '/api/v1/namespaces/ns/configmaps/cm/status/extra')).toBe(404);
  });

  it('serves only discovery and the read-only server paths besides the API', () => {
    for (const target of ['/', '/api', '/api/v1', '/apis', '/apis/apps', '/apis/apps/v1', '/version', '/openapi/v3/apis/apps/v1', '/healthz', '/readyz/ping', '/livez', '/metrics']) {
      expect(parsed('GET', target).info).toEqual({ kind: 'nonresource' });
    }
    expect(forwarded('GET', '/api/v1/namespaces/ns/services/s:80/proxy/')).toBe('/api/v1/namespaces/ns/services/s:80/proxy/');
    expect(refusal('GET', '/logs/')).toBe(404);
    expect(refusal('GET', '/logs/kube-apiserver.log')).toBe(404);
    expect(refusal('GET', '/debug/pprof/profile')).toBe(404);
    expect(refusal('POST', '/version')).toBe(405);
    expect(refusal('OPTIONS', '/api/v1/namespaces/ns/configmaps')).toBe(405);
  });
});
