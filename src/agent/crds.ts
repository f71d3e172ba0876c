import { ApiextensionsV1Api, type KubeConfig, type V1CustomResourceDefinition } from '@kubernetes/client-node';
import { buildCrds } from '../api/index.js';
import { isApiStatus } from '../kube/index.js';

/** Creates or updates the ControllerMesh CRDs (ShardingConfig, CircuitBreaker, FaultInjection) in the cluster. */
export async function installCrds(kc: KubeConfig): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  for (const crd of buildCrds()) {
    const body = crd as unknown as V1CustomResourceDefinition;
    const name = crd.metadata.name;
    try {
      const existing = await api.readCustomResourceDefinition({ name });
      await api.replaceCustomResourceDefinition({ name, body: { ...body, metadata: { ...body.metadata, resourceVersion: existing.metadata?.resourceVersion } } });
    } catch (err) {
      if (!isApiStatus(err, 404)) throw err;
      await api.createCustomResourceDefinition({ body });
    }
  }
}
