import type { ClusterShardView } from '../../routes/shard-view.js';
import { isWrite, type RequestInfo } from '../parse/index.js';
import { statusBody, type KubeStatus } from './status.js';

/**
 * Built-in cluster-scoped resources: passed through unless a limit names them. Any other resource listed
 * across namespaces is taken as namespaced and sharded (see docs/proxy.md, "Limitations").
 */
const CLUSTER_SCOPED = new Set([
  '/namespaces', '/nodes', '/persistentvolumes', '/componentstatuses',
  'rbac.authorization.k8s.io/clusterroles', 'rbac.authorization.k8s.io/clusterrolebindings',
  'apiextensions.k8s.io/customresourcedefinitions', 'apiregistration.k8s.io/apiservices',
  'storage.k8s.io/storageclasses', 'storage.k8s.io/csidrivers', 'storage.k8s.io/csinodes', 'storage.k8s.io/volumeattachments',
  'scheduling.k8s.io/priorityclasses', 'node.k8s.io/runtimeclasses', 'networking.k8s.io/ingressclasses',
  'networking.k8s.io/ipaddresses', 'networking.k8s.io/servicecidrs',
  'admissionregistration.k8s.io/mutatingwebhookconfigurations', 'admissionregistration.k8s.io/validatingwebhookconfigurations',
  'admissionregistration.k8s.io/validatingadmissionpolicies', 'admissionregistration.k8s.io/validatingadmissionpolicybindings',
  'certificates.k8s.io/certificatesigningrequests', 'flowcontrol.apiserver.k8s.io/flowschemas',
  'flowcontrol.apiserver.k8s.io/prioritylevelconfigurations', 'authentication.k8s.io/tokenreviews',
  'authorization.k8s.io/subjectaccessreviews', 'authorization.k8s.io/selfsubjectaccessreviews',
  'authorization.k8s.io/selfsubjectrulesreviews', 'authentication.k8s.io/selfsubjectreviews',
]);

export type Decision =
  /**
   * `sharded`: lists, watches and collection deletes get the shard's selector ANDed with the client's.
   * `byObject`: one object of a resource sharded by uid, judged once the proxy knows the uid (by-object.ts).
   */
  | { kind: 'forward'; sharded?: boolean; byObject?: boolean }
  | { kind: 'deny'; body: KubeStatus };

const PASS: Decision = { kind: 'forward' };
const SHARDED: Decision = { kind: 'forward', sharded: true };
const BY_OBJECT: Decision = { kind: 'forward', byObject: true };

function describe(group: string, resource: string): string {
  return group === '' ? resource : `${resource}.${group}`;
}

/**
 * What the proxy does with one request, given the shard's view of the target cluster. A Namespace object belongs
 * to its own bucket (`info.namespace` is its name, as in the API server's RequestInfo): the shard that owns the
 * namespace's objects is the one that may read or change it.
 */
export function decide(info: RequestInfo, view: ClusterShardView, shard: string): Decision {
  if (info.kind === 'nonresource') return PASS;
  const { verb, group, resource, namespace, name } = info;
  const namespaceObject = group === '' && resource === 'namespaces';
  if (namespaceObject && namespace === undefined && (verb === 'create' || verb === 'deletecollection')) {
    const what = verb === 'create' ? 'a Namespace create that does not name the namespace' : 'deleting every Namespace';
    return { kind: 'deny', body: statusBody(403, 'Forbidden', `${what} cannot be judged against shard "${shard}": refused`, { group, kind: resource }) };
  }
  if (!namespaceObject && view.shardsByObject(group, resource)) {
    if (verb === 'list' || verb === 'watch' || verb === 'deletecollection') return SHARDED;
    // A new object's uid is the API server's choice: whichever shard creates it, its bucket's owner reconciles it.
    if (verb === 'create' && name === undefined) return PASS;
    // The object itself and its status carry the uid the proxy judges (and, written, its precondition); a log, an
    // exec, an eviction or a scale does not, so its target could change after the judgement.
    if (verb !== 'create' && (info.subresource === undefined || info.subresource === 'status')) return BY_OBJECT;
    const what = `${info.subresource ?? verb} of ${describe(group, resource)}${name === undefined ? '' : ` "${name}"`}`;
    return { kind: 'deny', body: statusBody(403, 'Forbidden', `${what}: objects sharded by uid are read and written through the proxy only whole or by their status`, { group, kind: resource }) };
  }
  const clusterScoped = namespace === undefined && CLUSTER_SCOPED.has(`${group}/${resource}`);
  const sharded = clusterScoped ? view.limited(group, resource) : true;
  if (!sharded) return PASS;
  // The injected selector alone keeps lists, watches and collection deletes inside the shard.
  if (verb === 'list' || verb === 'watch' || verb === 'deletecollection') return SHARDED;
  if (namespace === undefined || view.ownsNamespace(namespace)) return PASS;
  const bucket = view.bucketOf(namespace);
  const what = `${describe(group, resource)}${name === undefined ? '' : ` "${name}"`} in namespace "${namespace}" (bucket ${bucket}) of cluster "${view.name}"`;
  const details = { ...(name === undefined ? {} : { name }), group, kind: resource };
  if (!isWrite(verb)) return { kind: 'deny', body: statusBody(404, 'NotFound', `${what} is not served by shard "${shard}"`, details) };
  const owner = view.ownerOf(bucket);
  const ownedBy = owner === undefined ? 'another shard' : `shard "${owner}"`;
  return { kind: 'deny', body: statusBody(403, 'Forbidden', `${what} belongs to ${ownedBy}, not to shard "${shard}": write refused`, details) };
}
