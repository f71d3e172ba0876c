import type { ShardingConfigModel } from '../api/index.js';

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
