import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { UnreadableBodyError } from '../../../src/errors.js';
import { protobufObjectName } from '../../../src/kube/protobuf.js';
import { LockRenamer, isRefusal, parseApiRequest, shardLockName, type ResourceRequest } from '../../../src/proxy/index.js';

// Bytes as client-go encodes them (tools/controller-runtime/protobuf-fixtures prints them).
const fixtures = JSON.parse(readFileSync(new URL('../fixtures/protobuf.json', import.meta.url), 'utf8')) as Record<'lease' | 'configMap' | 'status', string>;
const PROTOBUF = 'application/vnd.kubernetes.protobuf';

function info(method: string, path: string): ResourceRequest {
  const parsed = parseApiRequest(method, path);
  if (isRefusal(parsed) || parsed.info.kind !== 'resource') throw new Error(`not a resource request: ${path}`);
  return parsed.info;
}

/** The API server's rule for a Lease's, ConfigMap's or Endpoints' name (apimachinery's IsDNS1123Subdomain). */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/u;

describe('shardLockName', () => {
  it('is a valid object name for the shard names the hub publishes, readable and stable', () => {
    const name = shardLockName('operator-leader', 'cluster-a/demo-1-normal');
    expect(name).toMatch(/^operator-leader\.cluster-a\.demo-1-normal-[0-9a-f]{10}$/u);
    expect(name).toMatch(DNS_SUBDOMAIN);
    expect(shardLockName('operator-leader', 'cluster-a/demo-1-normal')).toBe(name);
  });

  it('keeps every shard apart, even where the readable parts read alike or are cut', () => {
    const names = [
      shardLockName('a', 'b/c.d'),
      shardLockName('a.b', 'c/d'),
      shardLockName('op', 'cluster-a/demo-0-canary'),
      shardLockName('op', 'cluster-b/demo-0-canary'),
      shardLockName('op', `cluster-a/${'x'.repeat(250)}-1`),
      shardLockName('op', `cluster-a/${'x'.repeat(250)}-2`),
      shardLockName('op', 'Shard_1'),
      shardLockName('op', 'shard-1'),
    ];
    expect(new Set(names).size).toBe(names.length);
    for (const name of names) {
      expect(name).toMatch(DNS_SUBDOMAIN);
      expect(name.length).toBeLessThanOrEqual(253);
    }
  });
});

describe('LockRenamer', () => {
  const shard = 'cluster-a/op-1-normal';
  const renamer = new LockRenamer({ leaderElectionName: 'operator-leader', shard, namespace: 'op' });
  const renamed = shardLockName('operator-leader', shard);

  it('recognises the lock by path for leases, configmaps and endpoints, and creates by body', () => {
    expect(renamer.concerns(info('GET', '/apis/coordination.k8s.io/v1/namespaces/op/leases/operator-leader'))).toBe('path');
    expect(renamer.concerns(info('PUT', '/api/v1/namespaces/op/configmaps/operator-leader'))).toBe('path');
    expect(renamer.concerns(info('GET', '/api/v1/namespaces/op/endpoints/operator-leader'))).toBe('path');
    expect(renamer.concerns(info('POST', '/apis/coordination.k8s.io/v1/namespaces/op/leases'))).toBe('body');
    expect(renamer.concerns(info('GET', '/api/v1/namespaces/op/configmaps/other'))).toBeUndefined();
    expect(renamer.concerns(info('GET', '/api/v1/namespaces/op/secrets/operator-leader'))).toBeUndefined();
  });

  it('refuses any shard\'s renamed lock by its own name, this shard\'s included', () => {
    const other = shardLockName('operator-leader', 'cluster-a/op-2-normal');
    expect(renamer.concerns(info('GET', `/apis/coordination.k8s.io/v1/namespaces/op/leases/${other}`))).toBe('foreign');
    expect(renamer.concerns(info('PUT', `/apis/coordination.k8s.io/v1/namespaces/op/leases/${other}`))).toBe('foreign');
    expect(renamer.concerns(info('DELETE', `/apis/coordination.k8s.io/v1/namespaces/op/leases/${renamed}`))).toBe('foreign');
    expect(renamer.concerns(info('PATCH', `/api/v1/namespaces/op/configmaps/${other}/status`))).toBe('foreign');
  });

  it('tells a create naming another shard\'s renamed lock, so it is refused before it can squat it', () => {
    const other = shardLockName('operator-leader', 'cluster-a/op-2-normal');
    const json = Buffer.from(JSON.stringify({ metadata: { name: other, namespace: 'op' } }));
    expect(renamer.renameBody(json, 'application/json')).toMatchObject({ object: 'foreign', name: other });
    expect(renamer.foreignRefusal('leases', other)).toContain('reads and takes only its own, by the name "operator-leader"');
  });

  it('leaves the same name in any other namespace an ordinary object', () => {
    expect(renamer.concerns(info('PUT', '/apis/coordination.k8s.io/v1/namespaces/victim/leases/operator-leader'))).toBeUndefined();
    expect(renamer.concerns(info('POST', '/apis/coordination.k8s.io/v1/namespaces/victim/leases'))).toBeUndefined();
    // A POST to a named path in the operator's namespace is not a lock create: a lock is created by a POST to the
    // collection (test/integration/proxy-fuzz.test.ts sends such paths against the API server as the oracle).
    expect(renamer.concerns(info('POST', '/apis/coordination.k8s.io/v1/namespaces/op/leases/binding'))).toBeUndefined();
  });

  it('renames a JSON lock on the way in and back in the object on the way out; a Status names what the API server saw', () => {
    expect(renamer.renamePath('/apis/coordination.k8s.io/v1/namespaces/op/leases/operator-leader')).toBe(`/apis/coordination.k8s.io/v1/namespaces/op/leases/${renamed}`);
    const body = Buffer.from(JSON.stringify({ metadata: { name: 'operator-leader', namespace: 'op' }, spec: { holderIdentity: 'x' } }));
    const sent = renamer.renameBody(body, 'application/json');
    expect(sent.object).toBe('lock');
    expect(JSON.parse(sent.body.toString()).metadata.name).toBe(renamed);
    const other = Buffer.from('{"metadata":{"name":"other"}}');
    expect(renamer.renameBody(other, 'application/json; charset=utf-8')).toEqual({ body: other, object: 'other', name: 'other' });
    expect(JSON.parse(renamer.restoreBody(sent.body).toString()).metadata.name).toBe('operator-leader');
    const status = Buffer.from(JSON.stringify({ kind: 'Status', message: `leases "${renamed}" not found`, details: { name: renamed } }));
    expect(renamer.restoreBody(status)).toBe(status);
  });

  it('renames a protobuf lock as client-go sends it, and back', () => {
    const lease = Buffer.from(fixtures.lease, 'hex');
    const sent = renamer.renameBody(lease, PROTOBUF);
    expect(sent.object).toBe('lock');
    expect(protobufObjectName(sent.body)).toBe(renamed);
    expect(renamer.restoreBody(sent.body).equals(lease)).toBe(true);
    // Not the lock: forwarded as it came; a protobuf Status as it came.
    const configMap = Buffer.from(fixtures.configMap, 'hex');
    expect(renamer.renameBody(configMap, PROTOBUF)).toEqual({ body: configMap, object: 'other', name: 'settings' });
    const status = Buffer.from(fixtures.status, 'hex');
    expect(renamer.restoreBody(status)).toBe(status);
    expect(renamer.accept('application/vnd.kubernetes.protobuf, */*')).toBe('application/vnd.kubernetes.protobuf, application/json');
    expect(renamer.accept('application/cbor, application/json')).toBe('application/json');
  });

  it('refuses a lock body it cannot read: another media type (415), a malformed one (400)', () => {
    const refusal = (body: string | Buffer, type: string | undefined): number | undefined => {
      try {
        renamer.renameBody(Buffer.from(body), type);
        return undefined;
      } catch (err) {
        if (err instanceof UnreadableBodyError) return err.statusCode;
        throw err;
      }
    };
    expect(refusal(Buffer.from('d9d9f7a1', 'hex'), 'application/cbor')).toBe(415);
    expect(refusal('metadata:\n  name: operator-leader\n', 'application/apply-patch+yaml')).toBe(415);
    expect(refusal('{"metadata":', 'application/json')).toBe(400);
    expect(refusal('[]', 'application/json-patch+json')).toBe(400);
    expect(refusal(Buffer.from(fixtures.lease, 'hex').subarray(0, 20), PROTOBUF)).toBe(400);
    expect(refusal('', 'application/cbor')).toBeUndefined();
  });
});
