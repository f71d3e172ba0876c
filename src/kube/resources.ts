import { CoreV1Api, CustomObjectsApi, ApisApi, type KubeConfig } from '@kubernetes/client-node';

/** A resource as the API server serves it: what a watch path and the generic object client need. */
export interface ResolvedResource {
  group: string;
  resource: string;
  apiVersion: string;
  kind: string;
  namespaced: boolean;
  /** Cluster-wide collection path, e.g. /api/v1/configmaps or /apis/apps/v1/deployments. */
  path: string;
}

/**
 * Resolves (group, resource) pairs through discovery, using each group's preferred version. A `*` group means
 * every group serving that resource. Unknown resources are returned in `missing` rather than thrown.
 */
export async function resolveResources(
  kc: KubeConfig,
  wanted: readonly { group: string; resource: string }[],
): Promise<{ resolved: ResolvedResource[]; missing: { group: string; resource: string }[] }> {
  const groups = new Map<string, string>([['', 'v1']]);
  const apis = await kc.makeApiClient(ApisApi).getAPIVersions();
  for (const g of apis.groups) groups.set(g.name, g.preferredVersion?.groupVersion ?? g.versions[0]?.groupVersion ?? '');
  const resourcesOf = new Map<string, { name: string; kind: string; namespaced: boolean }[]>();
  const load = async (group: string): Promise<{ name: string; kind: string; namespaced: boolean }[]> => {
    const cached = resourcesOf.get(group);
    if (cached) return cached;
    const groupVersion = groups.get(group) ?? '';
    const list =
      group === ''
        ? await kc.makeApiClient(CoreV1Api).getAPIResources()
        : await kc.makeApiClient(CustomObjectsApi).getAPIResources({ group, version: groupVersion.split('/')[1] ?? '' });
    const found = list.resources.filter((r) => !r.name.includes('/')).map((r) => ({ name: r.name, kind: r.kind, namespaced: r.namespaced }));
    resourcesOf.set(group, found);
    return found;
  };
  const resolved: ResolvedResource[] = [];
  const missing: { group: string; resource: string }[] = [];
  for (const want of wanted) {
    const candidates = want.group === '*' ? [...groups.keys()] : groups.has(want.group) ? [want.group] : [];
    let hit = false;
    for (const group of candidates) {
      const r = (await load(group)).find((x) => x.name === want.resource);
      if (!r) continue;
      hit = true;
      const apiVersion = groups.get(group) as string;
      const path = group === '' ? `/api/v1/${r.name}` : `/apis/${apiVersion}/${r.name}`;
      if (!resolved.some((x) => x.path === path)) resolved.push({ group, resource: r.name, apiVersion, kind: r.kind, namespaced: r.namespaced, path });
    }
    if (!hit) missing.push(want);
  }
  return { resolved, missing };
}
