import { ApiException, CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { cluster, kubeConfigFor, uniqueName } from './helpers/testbed.js';

async function status(call: Promise<unknown>): Promise<number> {
  try {
    await call;
    return 200;
  } catch (err) {
    if (err instanceof ApiException) return err.code;
    throw err;
  }
}

describe('the shared test bed: two clusters on one etcd', () => {
  it('keeps a namespace and a ConfigMap created in cluster A out of cluster B', async () => {
    const a = kubeConfigFor(cluster(0)).makeApiClient(CoreV1Api);
    const b = kubeConfigFor(cluster(1)).makeApiClient(CoreV1Api);
    const namespace = uniqueName('bed');

    await a.createNamespace({ body: { metadata: { name: namespace } } });
    await a.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'settings' }, data: { colour: 'teal' } } });

    const read = await a.readNamespacedConfigMap({ name: 'settings', namespace });
    expect(read.data).toEqual({ colour: 'teal' });
    expect(await status(b.readNamespace({ name: namespace }))).toBe(404);
    expect(await status(b.readNamespacedConfigMap({ name: 'settings', namespace }))).toBe(404);

    await a.deleteNamespace({ name: namespace });
  });
});
