import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ApiServerHandle } from '../api-server.js';
import { freePort } from '../free-port.js';
import { httpOk } from '../probes.js';
import { ServerProcess, serverControl, type ServerControl, type ServerStartOptions } from '../server-process.js';
import { resolveTool } from '../tools.js';
import { CLUSTER_CIDR } from './cni.js';
import { writeComponentKubeconfig } from './credentials.js';
import { tryRun } from './exec.js';

/** iptables (the default, through Debian's nft-backed iptables) or nftables (native; GA in 1.33). */
export type ProxyMode = 'iptables' | 'nftables';

export interface KubeProxyConfigOptions {
  kubeconfigPath: string;
  nodeName: string;
  mode: ProxyMode;
  healthzPort: number;
  metricsPort: number;
  clusterCidr?: string;
  /** kube-proxy's own oom_score_adj; default -999, which needs CAP_SYS_RESOURCE (0 where that is missing). */
  oomScoreAdj?: number;
}

/**
 * The KubeProxyConfiguration (kube-proxy's flags for these are deprecated in favour of the file):
 * - clusterCIDR with detectLocalMode ClusterCIDR: traffic to a Service from outside the pod range (the host, e.g. a
 *   test's client) is masqueraded, so replies come back through the host.
 * - healthz and metrics on loopback, on free ports (two beds' kube-proxies never collide on 10256/10249).
 * - conntrack left as the host has it (maxPerCore 0, timeouts 0): a test bed does not retune the host's sysctls.
 * - localhostNodePorts off: NodePorts on 127.0.0.1 would need net.ipv4.conf.all.route_localnet=1 host-wide;
 *   nodePortAddresses `primary`: NodePorts on the node's address only.
 */
export function kubeProxyConfig(options: KubeProxyConfigOptions): Record<string, unknown> {
  return {
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    clientConnection: { kubeconfig: options.kubeconfigPath },
    hostnameOverride: options.nodeName,
    mode: options.mode,
    clusterCIDR: options.clusterCidr ?? CLUSTER_CIDR,
    detectLocalMode: 'ClusterCIDR',
    healthzBindAddress: `127.0.0.1:${options.healthzPort}`,
    metricsBindAddress: `127.0.0.1:${options.metricsPort}`,
    iptables: { localhostNodePorts: false, masqueradeAll: false },
    // NodePorts on the node's own address only, not on every local IP (the pod bridge's gateway included).
    nodePortAddresses: ['primary'],
    conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
    ...(options.oomScoreAdj === undefined ? {} : { oomScoreAdj: options.oomScoreAdj }),
  };
}

export interface KubeProxyOptions extends ServerStartOptions {
  cluster: ApiServerHandle;
  nodeName: string;
  mode?: ProxyMode;
  oomScoreAdj?: number;
}

export interface KubeProxyHandle extends ServerControl {
  kubeconfigPath: string;
  configPath: string;
  mode: ProxyMode;
  healthzUrl: string;
  /** Removes every rule kube-proxy wrote (`kube-proxy --cleanup`: iptables, ipvs and nftables); call once it stopped. */
  cleanup(): Promise<void>;
}

/** Starts kube-proxy; ready once /healthz answers 200 (it has synced its rules at least once). */
export async function startKubeProxy(options: KubeProxyOptions): Promise<KubeProxyHandle> {
  const { cluster, dir, nodeName } = options;
  const mode = options.mode ?? 'iptables';
  const binary = options.binary ?? (await resolveTool('kube-proxy', options)).path;
  await mkdir(dir, { recursive: true });
  const kubeconfigPath = join(dir, 'kubeconfig');
  const configPath = join(dir, 'config.json');
  const [healthzPort, metricsPort] = [await freePort(), await freePort()];
  await writeComponentKubeconfig(cluster, kubeconfigPath, 'system:kube-proxy');
  await writeFile(configPath, `${JSON.stringify(kubeProxyConfig({ kubeconfigPath, nodeName, mode, healthzPort, metricsPort, oomScoreAdj: options.oomScoreAdj }), null, 2)}\n`);
  const healthzUrl = `http://127.0.0.1:${healthzPort}/healthz`;
  const server = new ServerProcess({
    name: `kube-proxy ${nodeName}`,
    binary,
    dir,
    logFileName: 'kube-proxy.log',
    args: [`--config=${configPath}`, '--v=2'],
    probe: () => httpOk(healthzUrl),
    readyTimeoutMs: 60_000,
    stopTimeoutMs: 10_000,
    logger: options.logger,
  });
  await server.start(options.signal);
  return {
    ...serverControl(server),
    kubeconfigPath,
    configPath,
    mode,
    healthzUrl,
    cleanup: async () => {
      await tryRun(binary, ['--cleanup', '--v=0'], { timeoutMs: 60_000 });
    },
  };
}
