import { CoreV1Api } from '@kubernetes/client-node';
import { Kvm } from '@nats-io/kv';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiServer, startEtcd, startNats, type EtcdHandle } from '../../src/dev/index.js';
import { observe } from './control-fixture.js';
import { kubeConfigFor } from './helpers/testbed.js';

// Private servers: stopping them must not disturb the shared bed other files use.
describe('private test servers restart on the same address with their data', () => {
  let dir: string;
  let etcd: EtcdHandle;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-restart-'));
    etcd = await startEtcd({ dir: join(dir, 'etcd') });
  });
  afterAll(async () => {
    await etcd?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('kube-apiserver: stop(), start(), and the same kubeconfig reads what was written before', async () => {
    const apiServer = await startApiServer({ etcd, name: 'private', dir: join(dir, 'private') });
    try {
      const api = () => kubeConfigFor(apiServer).makeApiClient(CoreV1Api);
      await api().createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name: 'before-restart' }, data: { n: '1' } } });

      await apiServer.stop();
      expect(apiServer.pid()).toBeUndefined();
      await expect(api().readNamespacedConfigMap({ name: 'before-restart', namespace: 'default' })).rejects.toThrow();

      await apiServer.start();
      const read = await api().readNamespacedConfigMap({ name: 'before-restart', namespace: 'default' });
      expect(read.data).toEqual({ n: '1' });
    } finally {
      await apiServer.stop();
    }
  });

  it('nats-server: stop(), start(), and a KV value written before is still there', async () => {
    const nats = await startNats({ dir: join(dir, 'nats') });
    try {
      const write = await observe(nats);
      await (await new Kvm(write).create('restart')).put('k', 'kept');
      await write.close();

      await nats.stop();
      await nats.start();

      const read = await observe(nats);
      try {
        expect((await (await new Kvm(read).open('restart')).get('k'))?.string()).toBe('kept');
      } finally {
        await read.close();
      }
    } finally {
      await nats.stop();
    }
  });
});
