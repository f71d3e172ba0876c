import type { RouteTable } from '../../transport/index.js';

/**
 * The kubeconfig an operator uses behind the proxy: one context per cluster the shard may reach (server
 * `<proxy>/clusters/<name>`), the current one its home cluster at the plain proxy URL, so an unmodified
 * operator works on its home cluster and a multicluster-aware one picks the others by context. No credentials:
 * the proxy holds them.
 */
export function operatorKubeconfig(table: RouteTable, proxyUrl: string): string {
  const base = proxyUrl.replace(/\/$/, '');
  const server = (cluster: string): string => (cluster === table.homeCluster ? base : `${base}/clusters/${encodeURIComponent(cluster)}`);
  const names = [table.homeCluster, ...table.clusters.map((c) => c.name).filter((n) => n !== table.homeCluster)];
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    // client-node 1.x refuses an http:// server unless this is set; the loopback hop has no TLS to skip.
    clusters: names.map((name) => ({ name, cluster: { server: server(name), 'insecure-skip-tls-verify': true } })),
    users: [{ name: 'ctrlmesh-proxy', user: {} }],
    contexts: names.map((name) => ({ name, context: { cluster: name, user: 'ctrlmesh-proxy' } })),
    'current-context': table.homeCluster,
  };
  return `${JSON.stringify(config, null, 2)}\n`;
}
