import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { SERVICE_CIDR, type ApiServerHandle } from '../api-server.js';
import { freePort } from '../free-port.js';
import { httpOk } from '../probes.js';
import { ServerProcess, serverControl, type ServerControl, type ServerStartOptions } from '../server-process.js';
import { resolveTool } from '../tools.js';
import { writeComponentKubeconfig } from './credentials.js';
import { whichBinary } from './exec.js';

export interface NetworkPolicyControllerOptions extends ServerStartOptions {
  cluster: ApiServerHandle;
  nodeName: string;
}

export interface NetworkPolicyControllerHandle extends ServerControl {
  healthzUrl: string;
}

/**
 * kube-router's firewall alone (no routing, no service proxy: the bridge CNI and kube-proxy keep those): it enforces
 * the cluster's NetworkPolicies on this node's pods with iptables and ipset, as a cluster's CNI would. With
 * bridge-nf-call-iptables (cni.ts enables it), traffic between pods on the bridge passes the host's FORWARD chain,
 * where it hooks in. Traffic from the node itself (the kubelet's probes, the API server: host processes here) is
 * admitted, as kube-router admits it on every node. Ready once its /healthz answers 200 (its controllers have synced).
 *
 * Its chains (KUBE-ROUTER-*, KUBE-POD-FW-*, KUBE-NWPLCY-*) and ipsets go with the node's other KUBE-* rules once no
 * node process runs (cleanupNodeLeftovers), not through `kube-router --cleanup-config`: that flushes every IPVS
 * service on the host, and in v2.1.0 builds the firewall's cleaner without its iptables handlers, so it removes none
 * of the firewall's chains.
 */
export async function startNetworkPolicyController(options: NetworkPolicyControllerOptions): Promise<NetworkPolicyControllerHandle> {
  const { cluster, dir, nodeName } = options;
  const binary = options.binary ?? (await resolveTool('kube-router', options)).path;
  // kube-router fills its sets by running the ipset command.
  await whichBinary('ipset', "install Debian's ipset package (apt-get install ipset)", options.env);
  await mkdir(dir, { recursive: true });
  const kubeconfigPath = join(dir, 'kubeconfig');
  // kube-router's RBAC lives in its deployment manifests, not in its module: the bed gives it the admin group.
  await writeComponentKubeconfig(cluster, kubeconfigPath, 'ctrlmesh:kube-router', ['system:masters']);
  const healthPort = await freePort();
  const healthzUrl = `http://127.0.0.1:${healthPort}/healthz`;
  const server = new ServerProcess({
    name: `kube-router firewall ${nodeName}`,
    binary,
    dir,
    logFileName: 'kube-router.log',
    args: [
      `--kubeconfig=${kubeconfigPath}`,
      `--hostname-override=${nodeName}`,
      '--run-firewall=true',
      '--run-router=false',
      '--run-service-proxy=false',
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      `--health-port=${healthPort}`,
      '--metrics-port=0',
      '--v=1',
    ],
    probe: () => httpOk(healthzUrl),
    readyTimeoutMs: 60_000,
    stopTimeoutMs: 10_000,
    logger: options.logger,
  });
  await server.start(options.signal);
  return { ...serverControl(server), healthzUrl };
}
