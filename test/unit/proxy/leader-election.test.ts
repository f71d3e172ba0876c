import { describe, expect, it } from 'vitest';
import { LockRenamer, isRefusal, parseApiRequest, type ResourceRequest } from '../../../src/proxy/index.js';

function info(method: string, path: string): ResourceRequest {
  const parsed = parseApiRequest(method, path);
  if (isRefusal(parsed) || parsed.info.kind !== 'resource') throw new Error(`not a resource request: ${path}`);
  return parsed.info;
}

describe('LockRenamer', () => {
  const renamer = new LockRenamer({ leaderElectionName: 'operator-leader', shard: 'shard-1', namespace: 'op' });

  it('recognises the lock by path for leases, configmaps and endpoints, and creates by body', () => {
    expect(renamer.concerns(info('GET', '/apis/coordination.k8s.io/v1/namespaces/op/leases/operator-leader'))).toBe('path');
    expect(renamer.concerns(info('PUT', '/api/v1/namespaces/op/configmaps/operator-leader'))).toBe('path');
    expect(renamer.concerns(info('GET', '/api/v1/namespaces/op/endpoints/operator-leader'))).toBe('path');
    expect(renamer.concerns(info('POST', '/apis/coordination.k8s.io/v1/namespaces/op/leases'))).toBe('body');
    expect(renamer.concerns(info('GET', '/api/v1/namespaces/op/configmaps/other'))).toBeUndefined();
    expect(renamer.concerns(info('GET', '/api/v1/namespaces/op/secrets/operator-leader'))).toBeUndefined();
  });

  it('leaves the same name in any other namespace an ordinary object', () => {
    expect(renamer.concerns(info('PUT', '/apis/coordination.k8s.io/v1/namespaces/victim/leases/operator-leader'))).toBeUndefined();
    expect(renamer.concerns(info('POST', '/apis/coordination.k8s.io/v1/namespaces/victim/leases'))).toBeUndefined();
    // Found by the differential fuzz: a POST to a named path in the operator's namespace is not a lock create.
    expect(renamer.concerns(info('POST', '/apis/coordination.k8s.io/v1/namespaces/op/leases/binding'))).toBeUndefined();
  });

  it('renames on the way in and back on the way out', () => {
    expect(renamer.renamePath('/apis/coordination.k8s.io/v1/namespaces/op/leases/operator-leader')).toBe(
      '/apis/coordination.k8s.io/v1/namespaces/op/leases/operator-leader---shard-1',
    );
    const body = JSON.stringify({ metadata: { name: 'operator-leader', namespace: 'op' }, spec: { holderIdentity: 'x' } });
    expect(JSON.parse(renamer.renameBody(body)).metadata.name).toBe('operator-leader---shard-1');
    expect(renamer.renameBody('{"metadata":{"name":"other"}}')).toBe('{"metadata":{"name":"other"}}');
    const out = JSON.stringify({ kind: 'Status', message: 'leases "operator-leader---shard-1" not found', details: { name: 'operator-leader---shard-1' } });
    const restored = JSON.parse(renamer.restoreBody(out));
    expect(restored.details.name).toBe('operator-leader');
    expect(restored.message).toBe('leases "operator-leader" not found');
  });
});
