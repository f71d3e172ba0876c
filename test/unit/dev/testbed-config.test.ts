import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { clusterNames, kubeconfigText, natsClientConfig } from '../../../src/dev/index.js';

describe('test bed configuration', () => {
  it('names clusters cluster-a, cluster-b, ... or as given', () => {
    expect(clusterNames(3)).toEqual(['cluster-a', 'cluster-b', 'cluster-c']);
    expect(clusterNames(['east', 'west'])).toEqual(['east', 'west']);
  });

  it('writes a kubeconfig that client-node reads: a context per cluster, the first current', () => {
    const entry = (name: string) => ({ name, server: `https://127.0.0.1:1/${name}`, caPem: 'CA', clientCertPem: 'CERT', clientKeyPem: 'KEY' });
    const kc = new KubeConfig();
    kc.loadFromString(kubeconfigText([entry('cluster-a'), entry('cluster-b')]));
    expect(kc.getContexts().map((c) => c.name)).toEqual(['cluster-a', 'cluster-b']);
    expect(kc.getCurrentContext()).toBe('cluster-a');
    kc.setCurrentContext('cluster-b');
    expect(kc.getCurrentCluster()?.server).toBe('https://127.0.0.1:1/cluster-b');
    expect(Buffer.from(kc.getCurrentUser()?.certData ?? '', 'base64').toString()).toBe('CERT');
  });

  it("gives NATS clients every server of a cluster, and an endpoint's one URL otherwise", async () => {
    const urls = ['nats://127.0.0.1:1', 'nats://127.0.0.1:2', 'nats://127.0.0.1:3'];
    expect((await natsClientConfig({ url: urls[0] as string, urls }, { role: 'hub' })).servers).toEqual(urls);
    expect((await natsClientConfig({ url: 'nats://127.0.0.1:9' }, { role: 'hub' })).servers).toEqual(['nats://127.0.0.1:9']);
  });
});
