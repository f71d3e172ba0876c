import { KubeConfig } from '@kubernetes/client-node';
import { Agent, fetch as undiciFetch } from 'undici';
import { inject } from 'vitest';
import type { ClusterInfo, TestbedInfo } from '../../../src/dev/index.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The shared test bed started by test/integration/global-setup.ts. */
    testbed: TestbedInfo;
  }
}

/** The shared bed's connection details. */
export function testbed(): TestbedInfo {
  return inject('testbed');
}

/** One of the shared bed's clusters, by position (0 = cluster-a). */
export function cluster(index: number): ClusterInfo {
  const found = testbed().clusters[index];
  if (!found) throw new Error(`the shared test bed has no cluster #${index}`);
  return found;
}

/** An admin KubeConfig for a cluster, read from the kubeconfig file the bed wrote (as a user's tools would). */
export function kubeConfigFor(info: Pick<ClusterInfo, 'kubeconfigPath'>): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(info.kubeconfigPath);
  return kc;
}

/** A name unique to this run, so tests never collide with leftovers of another file or run. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;
}

/** The sum of an API server metric's series whose labels include every one of `labels` (e.g. `verb="WATCH"`). */
export async function apiServerMetric(server: Pick<ClusterInfo, 'server' | 'caPem' | 'clientCertPem' | 'clientKeyPem'>, name: string, labels: readonly string[]): Promise<number> {
  const dispatcher = new Agent({ connect: { ca: server.caPem, cert: server.clientCertPem, key: server.clientKeyPem } });
  try {
    const text = await (await undiciFetch(`${server.server}/metrics`, { dispatcher })).text();
    const lines = text.split('\n').filter((l) => l.startsWith(`${name}{`) && labels.every((label) => l.includes(label)));
    return lines.reduce((sum, l) => sum + Number(l.split(' ').at(-1)), 0);
  } finally {
    await dispatcher.close();
  }
}

/** The watches of a resource an API server is serving now, its own included: its metrics, summed over scopes. */
export function apiServerWatches(server: Pick<ClusterInfo, 'server' | 'caPem' | 'clientCertPem' | 'clientKeyPem'>, resource: string): Promise<number> {
  return apiServerMetric(server, 'apiserver_longrunning_requests', [`resource="${resource}"`, 'verb="WATCH"']);
}
