import type { ApiServerHandle } from '../api-server.js';
import { writeKubeconfig } from '../kubeconfig.js';

/**
 * Writes a kubeconfig for one node component, with a client certificate from the cluster's CA naming the identity
 * Kubernetes' bootstrap RBAC (and the Node authorizer, for kubelets) already grants what that component needs:
 * system:node:<name> in system:nodes, system:kube-scheduler, system:kube-controller-manager, system:kube-proxy.
 */
export async function writeComponentKubeconfig(cluster: ApiServerHandle, path: string, user: string, groups: string[] = []): Promise<void> {
  const cert = await cluster.issueClientCertificate(user, groups);
  await writeKubeconfig(path, [{ name: cluster.name, server: cluster.server, caPem: cluster.caPem, clientCertPem: cert.certPem, clientKeyPem: cert.keyPem }]);
}
