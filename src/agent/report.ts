import type { KubernetesObject, V1Namespace, V1Pod } from '@kubernetes/client-node';
import { matches, shardOfPod, shardsOfConfig, type HashSettings } from '../sharding/index.js';
import { MESSAGE_SCHEMA_VERSION, type ClusterReport, type ObjectCount, type ReportedObject } from '../transport/index.js';
import type { ValidatedConfig } from './sharding-configs.js';

export interface ReportInput {
  cluster: string;
  settings: HashSettings;
  /** As the agent validated them: reported as written, valid or not; the valid ones select the pods reported. */
  shardingConfigs: readonly ValidatedConfig[];
  circuitBreakers: readonly KubernetesObject[];
  faultInjections: readonly KubernetesObject[];
  pods: readonly V1Pod[];
  namespaces: readonly V1Namespace[];
  /** Objects of each related resource, by resource name. */
  related: ReadonlyMap<string, readonly KubernetesObject[]>;
  /** Whether the API server filters by shard selector, as the agent last probed it (false until it knows). */
  shardSelectors: boolean;
  now: Date;
}

function reported(obj: KubernetesObject): ReportedObject {
  const { apiVersion, kind, metadata } = obj;
  return {
    namespace: metadata?.namespace ?? '',
    name: metadata?.name ?? '',
    generation: metadata?.generation ?? 0,
    ...(metadata?.labels ? { labels: metadata.labels } : {}),
    manifest: {
      apiVersion,
      kind,
      metadata: { name: metadata?.name, namespace: metadata?.namespace, generation: metadata?.generation },
      spec: (obj as KubernetesObject & { spec?: unknown }).spec,
    },
  };
}

function isReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

/**
 * The agent's whole view of its cluster, as the hub wants it (pure). Only pods a valid ShardingConfig selects, each
 * with its IP and, when exactly one config selects it (as the sidecar injector requires), the shard it runs.
 */
export function buildReport(input: ReportInput): ClusterReport {
  const home = { homeCluster: input.cluster, settings: input.settings };
  const selecting = input.shardingConfigs.flatMap(({ model }) =>
    model ? [{ namespace: model.namespace, selector: model.selector, meaning: shardsOfConfig(model, home) }] : [],
  );
  const pods = input.pods.flatMap((p) => {
    const name = p.metadata?.name ?? '';
    const labels = p.metadata?.labels ?? {};
    const configs = selecting.filter((s) => s.namespace === p.metadata?.namespace && matches(s.selector, labels));
    if (configs.length === 0) return [];
    const shard = configs.length === 1 ? shardOfPod((configs[0] as (typeof configs)[number]).meaning, name) : undefined;
    const ip = p.status?.podIP;
    return [{ namespace: p.metadata?.namespace ?? '', name, labels, ready: isReady(p), ...(ip ? { ip } : {}), ...(shard ? { shard: shard.name } : {}) }];
  });
  const objectCounts: ObjectCount[] = [];
  for (const [resource, objects] of input.related) {
    const perNamespace = new Map<string, number>();
    for (const o of objects) {
      const ns = o.metadata?.namespace ?? '';
      perNamespace.set(ns, (perNamespace.get(ns) ?? 0) + 1);
    }
    for (const [namespace, count] of perNamespace) objectCounts.push({ namespace, resource, count });
  }
  const byName = (a: { name: string; namespace?: string }, b: { name: string; namespace?: string }): number =>
    `${a.namespace ?? ''}/${a.name}` < `${b.namespace ?? ''}/${b.name}` ? -1 : 1;
  return {
    schema: MESSAGE_SCHEMA_VERSION,
    cluster: input.cluster,
    sentAt: input.now.toISOString(),
    hash: { algorithm: input.settings.algorithm, bucketCount: input.settings.bucketCount, labels: { ...input.settings.labels } },
    shardSelectors: input.shardSelectors,
    shardingConfigs: input.shardingConfigs.map((c) => reported(c.object)).sort(byName),
    circuitBreakers: input.circuitBreakers.map(reported).sort(byName),
    faultInjections: input.faultInjections.map(reported).sort(byName),
    pods: pods.sort(byName),
    namespaces: input.namespaces
      .map((n) => ({ name: n.metadata?.name ?? '', labels: n.metadata?.labels ?? {} }))
      .sort(byName),
    objectCounts: objectCounts.sort((a, b) => (`${a.namespace}/${a.resource}` < `${b.namespace}/${b.resource}` ? -1 : 1)),
  };
}
