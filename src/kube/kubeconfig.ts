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

/** The service-account files every pod gets (unless automountServiceAccountToken is off). */
const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * The pod's own service account, as client-go's in-cluster config finds it: the API server from the
 * KUBERNETES_SERVICE_HOST/PORT variables the kubelet sets (an address, so no cluster DNS is needed), the token and CA
 * from the mounted service-account files. Outside a pod: a FileError saying what is missing.
 */
export function inClusterKubeConfig(env: NodeJS.ProcessEnv = process.env): KubeConfig {
  if (!env.KUBERNETES_SERVICE_HOST || !env.KUBERNETES_SERVICE_PORT) {
    throw new FileError('in-cluster config', 'KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not in a pod?): pass --kubeconfig');
  }
  try {
    readFileSync(`${SERVICE_ACCOUNT_DIR}/token`);
  } catch (err) {
    throw new FileError(`${SERVICE_ACCOUNT_DIR}/token`, 'no service-account token (automountServiceAccountToken off?): pass --kubeconfig', { cause: err });
  }
  const kc = new KubeConfig();
  kc.loadFromCluster();
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
