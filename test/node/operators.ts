import type { KubernetesObject } from '@kubernetes/client-node';
import { ENABLE_PROXY_LABEL } from '../../src/agent/index.js';

const GROUP = 'ctrlmesh.kusionstack.io';

/** One operator as its author would deploy it on the mesh: a StatefulSet labelled for injection and its root ShardingConfig. */
export interface OperatorSpec {
  namespace: string;
  /** The StatefulSet's name (and its pods' app label). */
  name: string;
  /** ShardingConfig children are `<prefix>-<i>-normal`. */
  prefix: string;
  image: string;
  command?: string[];
  args: string[];
  /** What it reconciles: the root's resourceSelector, and the RBAC its credentials get (besides read of namespaces). */
  resources: { apiGroups: string[]; resources: string[]; verbs: string[] }[];
  /** RBAC its credentials get besides: what it uses but does not shard (its leader-election Lease). */
  extraRules?: { apiGroups: string[]; resources: string[]; verbs: string[] }[];
}

/** The service account whose token the proxies use: the operator's identity as the API server sees it. */
export const credentialsAccount = (op: OperatorSpec): string => `${op.name}-credentials`;

export function rootConfig(op: OperatorSpec, shards: number): KubernetesObject & { spec: unknown } {
  return {
    apiVersion: `${GROUP}/v1alpha1`,
    kind: 'ShardingConfig',
    metadata: { name: `${op.prefix}-root`, namespace: op.namespace },
    spec: {
      root: {
        prefix: op.prefix,
        targetStatefulSet: op.name,
        auto: { shardingSize: shards, everyShardReplicas: 1 },
        resourceSelector: op.resources.map((r) => ({ apiGroups: r.apiGroups, resources: r.resources })),
      },
      controller: { leaderElectionName: `${op.name}-leader` },
      selector: { matchLabels: { app: op.name } },
    },
  };
}

export function statefulSet(op: OperatorSpec, replicas: number): KubernetesObject & { spec: unknown } {
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: op.name, namespace: op.namespace },
    spec: {
      serviceName: op.name,
      replicas,
      podManagementPolicy: 'Parallel',
      selector: { matchLabels: { app: op.name } },
      template: {
        metadata: { labels: { app: op.name, [ENABLE_PROXY_LABEL]: 'true' } },
        spec: {
          terminationGracePeriodSeconds: 5,
          securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'operator',
              image: op.image,
              imagePullPolicy: 'Never',
              ...(op.command ? { command: op.command } : {}),
              args: op.args,
              env: [{ name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
              securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
            },
          ],
        },
      },
    },
  };
}

/** Namespace, the credentials' service account and its cluster-wide rights (an operator watches every namespace). */
export function operatorAccess(op: OperatorSpec): KubernetesObject[] {
  const name = credentialsAccount(op);
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: op.namespace } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace: op.namespace } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: `${op.namespace}-${name}` },
      rules: [
        ...[...op.resources, ...(op.extraRules ?? [])].map((r) => ({ apiGroups: r.apiGroups, resources: r.resources, verbs: r.verbs })),
        { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
        { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
      ],
    } as KubernetesObject,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: `${op.namespace}-${name}` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `${op.namespace}-${name}` },
      subjects: [{ kind: 'ServiceAccount', name, namespace: op.namespace }],
    } as KubernetesObject,
  ];
}
