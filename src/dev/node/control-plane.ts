import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ApiServerHandle } from '../api-server.js';
import { freePort } from '../free-port.js';
import { ServerProcess, serverControl, type ServerControl, type ServerStartOptions } from '../server-process.js';
import { resolveTool } from '../tools.js';
import { writeComponentKubeconfig } from './credentials.js';
import { httpsGet } from './https.js';

export interface ControlPlaneComponentOptions extends ServerStartOptions {
  /** Its dir holds the certificates and the service-account key this component reads. */
  cluster: ApiServerHandle;
}

export interface ControlPlaneComponentHandle extends ServerControl {
  kubeconfigPath: string;
  /** https://127.0.0.1:PORT/healthz (a self-signed serving certificate; anonymous callers may read it). */
  healthzUrl: string;
}

/** /healthz answers 200: the serving certificate is generated at start and signed by nobody we know, so unverified. */
const healthy = (url: string) => async (): Promise<boolean> => (await httpsGet(url, { insecure: true })).status === 200;

/**
 * kube-controller-manager for the node's cluster: Deployments make ReplicaSets make Pods, Endpoints(Slices) follow
 * Services, ServiceAccounts and the kube-root-ca.crt ConfigMap appear in each namespace (the ServiceAccount
 * admission plugin, on for a node, refuses pods until `default` exists), garbage collection, node lifecycle.
 */
export async function startControllerManager(options: ControlPlaneComponentOptions): Promise<ControlPlaneComponentHandle> {
  const { cluster } = options;
  return startComponent(options, 'kube-controller-manager', 'system:kube-controller-manager', async (kubeconfigPath) => [
    `--kubeconfig=${kubeconfigPath}`,
    // One instance per cluster: leader election would only add a Lease and a 15 s wait at every start.
    '--leader-elect=false',
    '--controllers=*',
    // Each controller acts as its own ServiceAccount in kube-system (what a real cluster audits), through tokens
    // kube-apiserver signs with sa.key and checks with sa.pub (both in the API server's dir).
    '--use-service-account-credentials=true',
    `--service-account-private-key-file=${join(cluster.dir, 'sa.key')}`,
    // Published as the kube-root-ca.crt ConfigMap: pods' kube-api-access volumes carry it to verify the API server.
    `--root-ca-file=${join(cluster.dir, 'ca.crt')}`,
    // The one node's pod range is fixed in its CNI config (10.244.0.0/24); nothing to allocate. No
    // --cluster-signing-*: kubelet certificates are issued up front, no CSR is ever signed.
    '--allocate-node-cidrs=false',
    `--cluster-name=${cluster.name}`,
  ]);
}

/** kube-scheduler's configuration file: its --kubeconfig and --leader-elect flags are deprecated for these fields. */
export function schedulerConfig(kubeconfigPath: string): Record<string, unknown> {
  return {
    apiVersion: 'kubescheduler.config.k8s.io/v1',
    kind: 'KubeSchedulerConfiguration',
    clientConnection: { kubeconfig: kubeconfigPath },
    leaderElection: { leaderElect: false },
  };
}

/** kube-scheduler: binds pods to the node (without it, pods stay Pending with no nodeName). */
export async function startScheduler(options: ControlPlaneComponentOptions): Promise<ControlPlaneComponentHandle> {
  return startComponent(options, 'kube-scheduler', 'system:kube-scheduler', async (kubeconfigPath) => {
    const configPath = join(options.dir, 'config.json');
    await writeFile(configPath, `${JSON.stringify(schedulerConfig(kubeconfigPath), null, 2)}\n`);
    return [`--config=${configPath}`];
  });
}

/**
 * One control-plane component: its own client certificate (user `user`), its own flags (`args`, given its
 * kubeconfig), serving /healthz on a free loopback port with a self-signed certificate kept in `<dir>/pki`.
 */
async function startComponent(
  options: ControlPlaneComponentOptions,
  name: 'kube-controller-manager' | 'kube-scheduler',
  user: string,
  args: (kubeconfigPath: string) => Promise<string[]>,
): Promise<ControlPlaneComponentHandle> {
  const { cluster, dir } = options;
  const binary = options.binary ?? (await resolveTool(name, options)).path;
  await mkdir(dir, { recursive: true });
  const kubeconfigPath = join(dir, 'kubeconfig');
  await writeComponentKubeconfig(cluster, kubeconfigPath, user);
  const port = await freePort();
  const healthzUrl = `https://127.0.0.1:${port}/healthz`;
  const server = new ServerProcess({
    name: `${name} ${cluster.name}`,
    binary,
    dir,
    logFileName: `${name}.log`,
    args: [...(await args(kubeconfigPath)), '--bind-address=127.0.0.1', `--secure-port=${port}`, `--cert-dir=${join(dir, 'pki')}`],
    probe: healthy(healthzUrl),
    readyTimeoutMs: 60_000,
    stopTimeoutMs: 10_000,
    logger: options.logger,
  });
  await server.start(options.signal);
  return { ...serverControl(server), kubeconfigPath, healthzUrl };
}
