import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ApiServerHandle } from '../api-server.js';
import { freePort } from '../free-port.js';
import { httpOk } from '../probes.js';
import { ServerProcess, serverControl, type ServerControl, type ServerStartOptions } from '../server-process.js';
import { resolveTool } from '../tools.js';
import { writeComponentKubeconfig } from './credentials.js';
import { httpsGet, nodeIsReady } from './https.js';

export interface KubeletConfigOptions {
  /** The cluster CA: clients of the kubelet's API (kube-apiserver for logs and exec) present certificates it signed. */
  clientCaFile: string;
  /** unix:///path/to/containerd.sock */
  containerRuntimeEndpoint: string;
  /** Where the kubelet serves its API: the node's address, so kube-apiserver reaches it at the node's InternalIP. */
  address: string;
  port: number;
  healthzPort: number;
  resolvConf: string;
  podLogsDir: string;
  volumePluginDir: string;
  /** The kubelet's own oom_score_adj; default -999, which needs CAP_SYS_RESOURCE (0 where that is missing). */
  oomScoreAdj?: number;
}

/**
 * The KubeletConfiguration (JSON is YAML, which the kubelet reads). Chosen for a small VM with cgroup v1 and no
 * systemd, serving one test bed:
 * - cgroupfs driver, like containerd's runc (SystemdCgroup = false); cgroup v1 is allowed explicitly (failCgroupV1).
 * - authentication by client certificate (the cluster CA) and bearer token (webhook: TokenReview), anonymous off;
 *   authorization by SubjectAccessReview, so kube-apiserver's kubelet client certificate (system:masters) may use
 *   logs and exec and nobody else may.
 * - eviction thresholds near zero and image garbage collection off (high threshold 100): a small disk or memory
 *   must not evict the bed's pods, and images imported by hand (never pulled) must not be collected.
 * - QoS cgroups and node allocatable enforced on pods only (no system/kube reserved cgroups to manage).
 * - no static pods, no read-only port, the healthz endpoint on loopback, pod logs and volume plugins under the
 *   node's dir instead of /var/log/pods and /usr/libexec.
 */
export function kubeletConfig(options: KubeletConfigOptions): Record<string, unknown> {
  return {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    address: options.address,
    port: options.port,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: options.healthzPort,
    authentication: {
      x509: { clientCAFile: options.clientCaFile },
      webhook: { enabled: true },
      anonymous: { enabled: false },
    },
    authorization: { mode: 'Webhook' },
    // The serving certificate is self-signed into <root-dir>/pki; kube-apiserver runs without
    // --kubelet-certificate-authority, so it does not verify it (logs and exec still work).
    rotateCertificates: false,
    serverTLSBootstrap: false,
    cgroupDriver: 'cgroupfs',
    cgroupsPerQOS: true,
    enforceNodeAllocatable: ['pods'],
    failSwapOn: false,
    failCgroupV1: false,
    containerRuntimeEndpoint: options.containerRuntimeEndpoint,
    serializeImagePulls: false,
    evictionHard: {
      'memory.available': '100Mi',
      'nodefs.available': '1%',
      'nodefs.inodesFree': '1%',
      'imagefs.available': '1%',
      'imagefs.inodesFree': '1%',
    },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    localStorageCapacityIsolation: true,
    resolvConf: options.resolvConf,
    clusterDomain: 'cluster.local',
    podLogsDir: options.podLogsDir,
    volumePluginDir: options.volumePluginDir,
    registerNode: true,
    ...(options.oomScoreAdj === undefined ? {} : { oomScoreAdj: options.oomScoreAdj }),
  };
}

const LOOPBACK_NAMESERVER = /^\s*nameserver\s+(127\.\S*|::1|0\.0\.0\.0)\s*$/;

/**
 * The resolv.conf pods with dnsPolicy Default get (and ClusterFirst ones too: the bed runs no cluster DNS): the
 * host's, minus nameservers on loopback (systemd-resolved's 127.0.0.53 is the pod itself inside a pod, so every
 * lookup would time out). What is left may have no nameserver at all: names then fail at once instead of slowly.
 */
export function podResolvConf(hostResolvConf: string): string {
  const lines = hostResolvConf.split('\n').filter((line) => line.trim() !== '' && !LOOPBACK_NAMESERVER.test(line));
  return `# written by ctrlmesh for the kubelet: /etc/resolv.conf without loopback nameservers\n${lines.join('\n')}${lines.length ? '\n' : ''}`;
}

export interface KubeletOptions extends ServerStartOptions {
  cluster: ApiServerHandle;
  nodeName: string;
  /** The node's IPv4 (--node-ip, and the address the kubelet serves on). */
  address: string;
  /** containerd's socket path. */
  containerdAddress: string;
  /** --root-dir. */
  rootDir: string;
  podLogsDir: string;
  volumePluginDir: string;
  oomScoreAdj?: number;
}

export interface KubeletHandle extends ServerControl {
  configPath: string;
  kubeconfigPath: string;
  /** The kubelet API's port on the node's address. */
  port: number;
}

/** Starts the kubelet; ready once its Node object reports Ready (registered, runtime and CNI network ready). */
export async function startKubelet(options: KubeletOptions): Promise<KubeletHandle> {
  const { cluster, dir, nodeName } = options;
  const binary = options.binary ?? (await resolveTool('kubelet', options)).path;
  await mkdir(dir, { recursive: true });
  await Promise.all([options.rootDir, options.podLogsDir, options.volumePluginDir].map((d) => mkdir(d, { recursive: true })));
  const files = {
    config: join(dir, 'config.json'),
    kubeconfig: join(dir, 'kubeconfig'),
    ca: join(dir, 'ca.crt'),
    resolvConf: join(dir, 'resolv.conf'),
  };
  const [port, healthzPort] = [await freePort(), await freePort()];
  const hostResolvConf = await readFile('/etc/resolv.conf', 'utf8').catch(() => '');
  await Promise.all([
    writeFile(files.ca, cluster.caPem),
    writeFile(files.resolvConf, podResolvConf(hostResolvConf)),
    writeComponentKubeconfig(cluster, files.kubeconfig, `system:node:${nodeName}`, ['system:nodes']),
    writeFile(
      files.config,
      `${JSON.stringify(
        kubeletConfig({
          clientCaFile: files.ca,
          containerRuntimeEndpoint: `unix://${options.containerdAddress}`,
          address: options.address,
          port,
          healthzPort,
          resolvConf: files.resolvConf,
          podLogsDir: options.podLogsDir,
          volumePluginDir: options.volumePluginDir,
          oomScoreAdj: options.oomScoreAdj,
        }),
        null,
        2,
      )}\n`,
    ),
  ]);
  const admin = { caPem: cluster.caPem, certPem: cluster.clientCertPem, keyPem: cluster.clientKeyPem };
  const server = new ServerProcess({
    name: `kubelet ${nodeName}`,
    binary,
    dir,
    logFileName: 'kubelet.log',
    args: [
      `--config=${files.config}`,
      `--kubeconfig=${files.kubeconfig}`,
      `--root-dir=${options.rootDir}`,
      `--hostname-override=${nodeName}`,
      `--node-ip=${options.address}`,
      '--v=2',
    ],
    // Both: after a restart the Node object still says Ready (from before) until the kubelet's own healthz answers.
    probe: async () => {
      if (!(await httpOk(`http://127.0.0.1:${healthzPort}/healthz`))) return false;
      const answer = await httpsGet(`${cluster.server}/api/v1/nodes/${nodeName}`, { identity: admin });
      return answer.status === 200 && nodeIsReady(answer.body);
    },
    // Registration, the first status with the CNI network ready and the node lease take 10-30 s on 2 cores.
    readyTimeoutMs: 120_000,
    stopTimeoutMs: 15_000,
    logger: options.logger,
  });
  await server.start(options.signal);
  return { ...serverControl(server), configPath: files.config, kubeconfigPath: files.kubeconfig, port };
}
