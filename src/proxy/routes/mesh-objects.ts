import { isWrite, type ResourceRequest } from '../request/parse/index.js';
import type { LockRenamer } from './leader-election.js';
import type { HiddenObjects, ObjectMetadata } from './shard-view.js';

/** The agent's default `proxy.secretName`, and so the proxy's `--mesh-secret`. */
export const DEFAULT_MESH_SECRET = 'ctrlmesh-proxy';

/** The API group of ShardingConfigs, CircuitBreakers and FaultInjections. */
const MESH_GROUP = 'ctrlmesh.kusionstack.io';

/** Kinds whose writes make pods: in the operator's namespace such a pod could mount another shard's credentials. */
const POD_MAKERS = new Set([
  '/pods', '/replicationcontrollers', '/podtemplates',
  'apps/deployments', 'apps/replicasets', 'apps/statefulsets', 'apps/daemonsets',
  'batch/jobs', 'batch/cronjobs',
]);

/** Pod subresources that reach into a running container (and so into its mounted credentials). */
const INTO_CONTAINERS = new Set(['exec', 'attach', 'portforward', 'proxy', 'ephemeralcontainers']);

/** Namespaced RBAC: a binding in the operator's namespace could give anyone its Secrets. */
const RBAC = new Set(['rbac.authorization.k8s.io/roles', 'rbac.authorization.k8s.io/rolebindings']);

/** Kinds with a rule in the operator's namespace: a collection delete across namespaces would reach them there. */
const RULED = new Set([...POD_MAKERS, ...RBAC, '/secrets']);

function describe(info: ResourceRequest): string {
  const what = info.group === '' ? info.resource : `${info.resource}.${info.group}`;
  return `${info.subresource === undefined ? what : `${what}/${info.subresource}`}${info.name === undefined ? '' : ` "${info.name}"`}`;
}

/**
 * What belongs to the mesh rather than to any shard, whatever bucket it falls in: the operator's namespace holds every
 * shard's credentials (the Secrets named `meshSecret` and `<meshSecret>.<cluster>.<shard>`), its pods run every shard's
 * proxy, and its ShardingConfigs and rules configure them. So in that namespace no shard reads or writes the mesh's
 * Secrets, writes pods or anything that makes them, reaches into a pod's containers, or writes Roles and RoleBindings;
 * and nowhere does a shard write the mesh's own kinds. Everything else there is judged by the namespace's bucket, as
 * anywhere (docs/proxy.md, "The operator's namespace"; test/integration/proxy-boundary.test.ts).
 */
export class MeshObjects implements HiddenObjects {
  readonly namespace: string;
  private readonly secret: string;
  private readonly locks: LockRenamer | undefined;

  constructor(options: { namespace: string; meshSecret: string; locks?: LockRenamer | undefined }) {
    this.namespace = options.namespace;
    this.secret = options.meshSecret;
    this.locks = options.locks;
  }

  /** Whether `name` is one of the mesh's credential Secrets (or could become one: a `generateName` prefix). */
  isMeshSecretName(name: string): boolean {
    return name === this.secret || name.startsWith(`${this.secret}.`);
  }

  hiddenIn(group: string, resource: string): boolean {
    return (group === '' && resource === 'secrets') || this.locks?.locksIn(group, resource) === true;
  }

  hides(object: ObjectMetadata): boolean {
    if (this.locks?.hides(object) === true) return true;
    return object.namespace === this.namespace && typeof object.name === 'string' && this.isMeshSecretName(object.name);
  }

  /** Whether a create of a Secret in `namespace` must be read to judge the name it makes. */
  judgesSecretNames(namespace: string | undefined): boolean {
    return namespace === this.namespace;
  }

  /** Why the request is refused (403) whatever the shard owns, or undefined where the shard's buckets decide. */
  refusal(info: ResourceRequest): string | undefined {
    const key = `${info.group}/${info.resource}`;
    const write = isWrite(info.verb);
    if (info.group === MESH_GROUP && write) {
      return `${describe(info)}: ShardingConfigs, CircuitBreakers and FaultInjections configure the mesh; no shard writes them through the proxy`;
    }
    if (info.namespace === undefined) {
      if (info.verb === 'deletecollection' && RULED.has(key)) {
        return `deleting ${describe(info)} across all namespaces would reach the operator's namespace "${this.namespace}": name a namespace`;
      }
      return undefined;
    }
    if (info.namespace !== this.namespace) return undefined;
    const where = `in the operator's namespace "${this.namespace}"`;
    if (key === '/secrets' && (info.name === undefined ? info.verb === 'deletecollection' : this.isMeshSecretName(info.name))) {
      return `${describe(info)} ${where} holds the mesh's credentials: no shard reads or writes it`;
    }
    if (key === '/pods' && INTO_CONTAINERS.has(info.subresource ?? '')) {
      return `${describe(info)} ${where}: its containers run the mesh's proxies and hold their credentials`;
    }
    if (write && POD_MAKERS.has(key)) {
      return `${describe(info)} ${where}: no shard writes pods there, or anything that makes them, since a pod there could mount any shard's credentials`;
    }
    if (write && RBAC.has(key)) return `${describe(info)} ${where}: no shard grants access there`;
    return undefined;
  }
}
