import type { CoreV1Api } from '@kubernetes/client-node';
import { isApiStatus } from './api-status.js';

/** Creates a namespace unless it exists. */
export async function ensureNamespace(core: CoreV1Api, name: string): Promise<void> {
  try {
    await core.createNamespace({ body: { metadata: { name } } });
  } catch (err) {
    if (!isApiStatus(err, 409)) throw err;
  }
}
