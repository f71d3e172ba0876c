import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { FileError } from '../errors.js';

/** Loads a kubeconfig file; an unreadable file or one without a current cluster is a FileError naming it. */
export function loadKubeConfig(path: string): KubeConfig {
  const kc = new KubeConfig();
  try {
    kc.loadFromFile(path);
  } catch (err) {
    throw new FileError(path, `not a readable kubeconfig: ${(err as Error).message}`, { cause: err });
  }
  if (!kc.getCurrentCluster()) throw new FileError(path, 'the kubeconfig has no current context with a cluster; set current-context');
  return kc;
}

/** The API server's URL and CA bundle (PEM): what a cluster may tell others about itself, never its credentials. */
export function clusterEndpoint(kc: KubeConfig): { server: string; caPem: string } {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new FileError('kubeconfig', 'no current cluster');
  const caPem = cluster.caData
    ? Buffer.from(cluster.caData, 'base64').toString('utf8')
    : cluster.caFile
      ? readFileSync(cluster.caFile, 'utf8')
      : '';
  return { server: cluster.server, caPem };
}
