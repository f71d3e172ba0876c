import type { CoreV1Api } from '@kubernetes/client-node';
import { isApiStatus } from '../../kube/index.js';

/** Creates a Secret, or replaces the one of that name: the bed's credentials are rewritten at every start. */
export async function putSecret(
  api: CoreV1Api,
  secret: { namespace: string; name: string; data: Record<string, string>; type?: string },
): Promise<void> {
  const body = {
    metadata: { name: secret.name, namespace: secret.namespace },
    type: secret.type ?? 'Opaque',
    stringData: secret.data,
  };
  try {
    await api.createNamespacedSecret({ namespace: secret.namespace, body });
  } catch (err) {
    if (!isApiStatus(err, 409)) throw err;
    await api.replaceNamespacedSecret({ name: secret.name, namespace: secret.namespace, body });
  }
}
