import type { ShardingConfigModel } from '../api/index.js';
import { objectSelection, type HashAlgorithm } from '../sharding/index.js';

/** The (group, resource) pairs valid ShardingConfigs relate to: what the agent labels and counts (pure). */
export function relatedResources(configs: readonly ShardingConfigModel[]): { group: string; resource: string }[] {
  const seen = new Map<string, { group: string; resource: string }>();
  for (const config of configs) {
    const limits = [...config.limits, ...(config.root?.resourceSelector ?? [])];
    for (const limit of limits) {
      for (const rg of limit.relateResources) {
        for (const group of rg.apiGroups.length ? rg.apiGroups : ['']) {
          for (const resource of rg.resources) {
            // Namespaces are labelled on their own; a wildcard resource would mean every kind in the cluster.
            if (resource === '*' || resource === 'namespaces') continue;
            seen.set(`${group}/${resource}`, { group, resource });
          }
        }
      }
    }
  }
  return [...seen.values()].sort((a, b) => (`${a.group}/${a.resource}` < `${b.group}/${b.resource}` ? -1 : 1));
}

/** What the agent labels (its passes and its webhook): whether namespaces, and which related resources. */
export interface LabelScope {
  namespaces: boolean;
  resources: { group: string; resource: string }[];
}

/** Whether `scope` labels the objects of a resource as discovery resolved it (a `*` group names every group). */
export function labelsResource(scope: LabelScope, resource: { group: string; resource: string }): boolean {
  return scope.resources.some((r) => (r.group === '*' || r.group === resource.group) && r.resource === resource.resource);
}

/** Labels nothing: the scope while the agent does not yet know whether its API server filters by hash range. */
export const NOTHING_LABELLED: LabelScope = Object.freeze({ namespaces: false, resources: [] });

/**
 * What needs labels in this cluster (pure). Objects of a config's related resources are labelled only where its
 * proxies select by label (`objectSelection`); the others are still watched, for the report's object counts.
 * Namespace labels are shared by every operator of the cluster, including multicluster operators whose config lives
 * in another cluster, so they stay unless this API server filters by hash range itself (`fnv-range`), or when some local
 * config asks for labels `Always`. Labels already written are never removed: narrowing only stops adding them.
 * The agent asks for no scope at all before its probe has answered (`NOTHING_LABELLED`): a label written on a guess
 * would stay for good on a server that needs none.
 */
export function labelScope(input: { configs: readonly ShardingConfigModel[]; algorithm: HashAlgorithm; serverShardSelectors: boolean }): LabelScope {
  const { configs, algorithm, serverShardSelectors } = input;
  const labelled = configs.filter((config) => objectSelection({ algorithm, serverShardSelectors, objectLabels: config.objectLabels }) === 'labels');
  return {
    namespaces: !(serverShardSelectors && algorithm === 'fnv-range') || configs.some((config) => config.objectLabels === 'Always'),
    resources: relatedResources(labelled),
  };
}
