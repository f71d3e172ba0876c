import type { CoreV1Api, V1ConfigMap } from '@kubernetes/client-node';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';

/** The annotation the sample operator maintains on every ConfigMap it reconciles. */
export const RECONCILED_BY = 'demo.ctrlmesh.io/reconciled-by';

/** The merge patch that brings a ConfigMap to its desired state, or undefined when it is there already. */
export function desiredPatch(configMap: V1ConfigMap, shard: string): { metadata: { annotations: Record<string, string> } } | undefined {
  if (configMap.metadata?.annotations?.[RECONCILED_BY] === shard) return undefined;
  return { metadata: { annotations: { [RECONCILED_BY]: shard } } };
}

/**
 * Reconciles one ConfigMap: stamps it with the shard that handled it and reports the reconcile on `out`.
 * Written like any operator's reconciler: it has no idea a proxy shards what it sees.
 */
export async function reconcile(options: { api: CoreV1Api; configMap: V1ConfigMap; shard: string; out: (line: string) => void }): Promise<void> {
  const { api, configMap, shard, out } = options;
  const name = configMap.metadata?.name ?? '';
  const namespace = configMap.metadata?.namespace ?? '';
  const patch = desiredPatch(configMap, shard);
  if (patch) {
    await api.patchNamespacedConfigMap({ name, namespace, body: patch }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
  }
  out(`reconciled ${namespace}/${name} shard=${shard}`);
}
