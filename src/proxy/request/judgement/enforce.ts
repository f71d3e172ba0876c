import type { ClusterShardView } from '../../routes/shard-view.js';
import { isWrite, type RequestInfo, type ResourceRequest } from '../parse/index.js';
import { statusBody, type KubeStatus } from './status.js';

/**
 * Built-in cluster-scoped resources: read freely unless a limit names them, written only where
 * `spec.unshardedWrites` names them. Any other resource listed across namespaces is taken as namespaced and sharded
 * (docs/proxy.md, "Cluster-scoped objects").
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

/** Creates that write nothing: they ask the API server a question about the caller or a token. */
const REVIEWS = new Set([
  'authentication.k8s.io/tokenreviews', 'authentication.k8s.io/selfsubjectreviews', 'authorization.k8s.io/subjectaccessreviews',
  'authorization.k8s.io/selfsubjectaccessreviews', 'authorization.k8s.io/selfsubjectrulesreviews',
]);

export type Decision =
  /**
   * `sharded`: lists, watches and collection deletes get the shard's selector ANDed with the client's.
   * `byObject`: one object judged once the proxy has read it: one sharded by uid, or one outside namespaces, by its
   * labels (object-write.ts, judged-object.ts). `created`: a create judged by the object in its body (created-object.ts).
   */
  | { kind: 'forward'; sharded?: boolean; byObject?: boolean; created?: boolean }
  | { kind: 'deny'; body: KubeStatus };

const PASS: Decision = { kind: 'forward' };
const SHARDED: Decision = { kind: 'forward', sharded: true };
const BY_OBJECT: Decision = { kind: 'forward', byObject: true };
const CREATED: Decision = { kind: 'forward', created: true };

function describe(group: string, resource: string, subresource?: string): string {
  const what = group === '' ? resource : `${resource}.${group}`;
  return subresource === undefined ? what : `${what}/${subresource}`;
}

/** Kubernetes' own API groups: their cluster-scoped kinds (RBAC, webhooks, CRDs, nodes, volumes, ...) can grant access. */
function isBuiltInGroup(group: string): boolean {
  return group === '' || group.endsWith('.k8s.io') || group.endsWith('.kubernetes.io');
}

function forbidden(message: string, group: string, resource: string, name?: string): Decision {
  return { kind: 'deny', body: statusBody(403, 'Forbidden', message, { ...(name === undefined ? {} : { name }), group, kind: resource }) };
}

/**
 * An object outside namespaces (a path that names none yet names an object or creates one, or a built-in kind known
 * to live there). Built-in kinds are read freely, as every shard needs them, unless a limit shards them; their writes
 * grant access to every bucket, so they are refused unless `spec.unshardedWrites` names them. Other kinds (custom
 * resources) belong to the bucket of their labels, judged for one object as their list is (docs/proxy.md,
 * "Cluster-scoped objects").
 */
function decideOutsideNamespaces(info: ResourceRequest, view: ClusterShardView, shard: string): Decision {
  const { verb, group, resource, name, subresource } = info;
  if (isWrite(verb) && view.mayWriteUnsharded(group, resource, subresource)) return PASS;
  const many = verb === 'list' || verb === 'watch' || verb === 'deletecollection';
  if (isBuiltInGroup(group)) {
    if (isWrite(verb) && !(verb === 'create' && REVIEWS.has(`${group}/${resource}`))) {
      return forbidden(
        `writing ${describe(group, resource, subresource)}${name === undefined ? '' : ` "${name}"`} can grant access beyond shard "${shard}"'s buckets: refused unless the ShardingConfig's spec.unshardedWrites names it`,
        group,
        resource,
        name,
      );
    }
    if (!view.limited(group, resource)) return PASS;
    if (many) return SHARDED;
    if (verb === 'create') return PASS;
  }
  if (many) return SHARDED;
  if (verb === 'create' && name === undefined) return CREATED;
  if (verb !== 'create' && (subresource === undefined || subresource === 'status')) return BY_OBJECT;
  return forbidden(`${describe(group, resource, subresource)} "${name ?? ''}" outside namespaces: only the object itself and its status are read and written through the proxy`, group, resource, name);
}

/**
 * What the proxy does with one request, given the shard's view of the target cluster. A Namespace object belongs
 * to its own bucket (`info.namespace` is its name, as in the API server's RequestInfo): the shard that owns the
 * namespace's objects is the one that may read or change it.
 */
export function decide(info: RequestInfo, view: ClusterShardView, shard: string): Decision {
  if (info.kind === 'nonresource') return PASS;
  const { verb, group, resource, namespace, name } = info;
  // The API server serves no update or patch of a collection: refused here rather than trusted to fail there.
  if ((verb === 'update' || verb === 'patch') && name === undefined) {
    return { kind: 'deny', body: statusBody(405, 'MethodNotAllowed', `${verb} of ${describe(group, resource)} needs the name of an object`, { group, kind: resource }) };
  }
  const namespaceObject = group === '' && resource === 'namespaces';
  if (namespaceObject && namespace === undefined && (verb === 'create' || verb === 'deletecollection')) {
    const what = verb === 'create' ? 'a Namespace create that does not name the namespace' : 'deleting every Namespace';
    return forbidden(`${what} cannot be judged against shard "${shard}": refused`, group, resource);
  }
  // Every shard reads the Namespaces (an operator watches them to find its own), unless a limit shards them.
  if (namespaceObject && namespace === undefined) return view.limited(group, resource) ? SHARDED : PASS;
  // Minting a token for a ServiceAccount hands out whatever that account may do, beyond any bucket.
  if (group === '' && resource === 'serviceaccounts' && info.subresource === 'token' && !view.mayWriteUnsharded(group, resource, 'token')) {
    return forbidden(`serviceaccounts/token "${name ?? ''}": a token works without the proxy: refused unless the ShardingConfig's spec.unshardedWrites names serviceaccounts/token`, group, resource, name);
  }
  if (!namespaceObject && view.shardsByObject(group, resource)) {
    if (verb === 'list' || verb === 'watch' || verb === 'deletecollection') return SHARDED;
    // A new object's uid is the API server's choice: whichever shard creates it, its bucket's owner reconciles it.
    if (verb === 'create' && name === undefined) return PASS;
    // The object itself and its status carry the uid the proxy judges (and, written, its precondition); a log, an
    // exec, an eviction or a scale does not, so its target could change after the judgement.
    if (verb !== 'create' && (info.subresource === undefined || info.subresource === 'status')) return BY_OBJECT;
    const what = `${describe(group, resource, info.subresource)}${name === undefined ? '' : ` "${name}"`}`;
    return forbidden(`${what}: objects sharded by uid are read and written through the proxy only whole or by their status`, group, resource);
  }
  // A namespaced resource has no path naming one object, or creating one, outside a namespace.
  if (!namespaceObject && namespace === undefined && (CLUSTER_SCOPED.has(`${group}/${resource}`) || name !== undefined || verb === 'create')) {
    return decideOutsideNamespaces(info, view, shard);
  }
  // The injected selector alone keeps lists, watches and collection deletes inside the shard.
  if (verb === 'list' || verb === 'watch' || verb === 'deletecollection') return SHARDED;
  if (namespace === undefined || view.ownsNamespace(namespace)) return PASS;
  const bucket = view.bucketOf(namespace);
  const what = `${describe(group, resource)}${name === undefined ? '' : ` "${name}"`} in namespace "${namespace}" (bucket ${bucket}) of cluster "${view.name}"`;
  const details = { ...(name === undefined ? {} : { name }), group, kind: resource };
  if (!isWrite(verb)) return { kind: 'deny', body: statusBody(404, 'NotFound', `${what} is not served by shard "${shard}"`, details) };
  const owner = view.ownerOf(bucket);
  const ownedBy = owner === undefined ? 'another shard' : `shard "${owner}"`;
  return forbidden(`${what} belongs to ${ownedBy}, not to shard "${shard}": write refused`, group, resource, name);
}
