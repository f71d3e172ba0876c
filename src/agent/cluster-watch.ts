import {
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type V1Namespace,
  type V1Pod,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { API_GROUP } from '../api/index.js';
import { resolveResources, watchCollection, type ResolvedResource, type WatchedCollection } from '../kube/index.js';

export interface RelatedCollection {
  resource: ResolvedResource;
  watch: WatchedCollection<KubernetesObject>;
}

/**
 * Everything the agent watches in its cluster, through informers: the three ControllerMesh kinds, pods, namespaces,
 * and the related resources the ShardingConfigs name (started and stopped as that set changes).
 */
export class ClusterWatch {
  readonly shardingConfigs: WatchedCollection<KubernetesObject>;
  readonly circuitBreakers: WatchedCollection<KubernetesObject>;
  readonly faultInjections: WatchedCollection<KubernetesObject>;
  readonly pods: WatchedCollection<V1Pod>;
  readonly namespaces: WatchedCollection<V1Namespace>;
  readonly related = new Map<string, RelatedCollection>();
  private readonly objects: KubernetesObjectApi;

  constructor(
    private readonly options: { kc: KubeConfig; logger: Logger; onChange: (updated?: KubernetesObject) => void; onSyncChange: () => void },
  ) {
    const { kc } = options;
    const core = kc.makeApiClient(CoreV1Api);
    const custom = kc.makeApiClient(CustomObjectsApi);
    this.objects = KubernetesObjectApi.makeApiClient(kc);
    const crd = (plural: string): WatchedCollection<KubernetesObject> =>
      this.watch(`/apis/${API_GROUP}/v1alpha1/${plural}`, plural, async () =>
        (await custom.listClusterCustomObject({ group: API_GROUP, version: 'v1alpha1', plural })) as KubernetesListObject<KubernetesObject>,
      );
    this.shardingConfigs = crd('shardingconfigs');
    this.circuitBreakers = crd('circuitbreakers');
    this.faultInjections = crd('faultinjections');
    this.pods = this.watch('/api/v1/pods', 'pods', () => core.listPodForAllNamespaces());
    this.namespaces = this.watch('/api/v1/namespaces', 'namespaces', () => core.listNamespace());
  }

  /**
   * Whether every informer is listing and watching. A related resource the agent may not list does not count: a
   * namespace admin's ShardingConfig naming a kind outside the agent's role must not stall the cluster's reports.
   */
  synced(): boolean {
    const related = [...this.related.values()].map((r) => r.watch).filter((w) => !w.forbidden());
    return [this.shardingConfigs, this.circuitBreakers, this.faultInjections, this.pods, this.namespaces, ...related].every((w) => w.synced());
  }

  /** Watches exactly the given related resources; returns those the API server does not serve. */
  async setRelated(wanted: readonly { group: string; resource: string }[]): Promise<{ group: string; resource: string }[]> {
    const { resolved, missing } = await resolveResources(this.options.kc, wanted);
    const keep = new Set(resolved.map((r) => r.path));
    for (const [path, r] of this.related) {
      if (!keep.has(path)) {
        this.related.delete(path);
        await r.watch.stop();
      }
    }
    for (const resource of resolved) {
      if (this.related.has(resource.path)) continue;
      const watch = this.watch(resource.path, resource.resource, () => this.objects.list(resource.apiVersion, resource.kind));
      this.related.set(resource.path, { resource, watch });
    }
    return missing;
  }

  async stop(): Promise<void> {
    const all = [this.shardingConfigs, this.circuitBreakers, this.faultInjections, this.pods, this.namespaces, ...[...this.related.values()].map((r) => r.watch)];
    await Promise.all(all.map((w) => w.stop()));
  }

  private watch<T extends KubernetesObject>(path: string, name: string, list: () => Promise<KubernetesListObject<T>>): WatchedCollection<T> {
    return watchCollection<T>({
      kc: this.options.kc,
      path,
      list,
      name,
      logger: this.options.logger,
      onChange: this.options.onChange,
      onSyncChange: this.options.onSyncChange,
    });
  }
}
