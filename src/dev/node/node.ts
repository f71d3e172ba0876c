import { createHash } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { ApiServerHandle } from '../api-server.js';
import { TestbedError } from '../../errors.js';
import type { ServerControl } from '../server-process.js';
import { resolveTool, type ToolOptions } from '../tools.js';
import { nodeAddress } from './address.js';
import {
  criSandboxIds,
  deleteRuncContainers,
  killShims,
  kubeletPodUids,
  removeCniLeftovers,
  removeContainerLogLinks,
  removeKubeRouterSets,
  removeKubeRules,
  removePodCgroups,
  unmountUnder,
} from './cleanup.js';
import { mayLowerOomScore } from './capabilities.js';
import { CNI_BIN_DIR, CNI_NETWORK_NAME, enableForwarding, interfaceMtu, POD_BRIDGE, removeBridge, writeCniConfig } from './cni.js';
import { CRI_NAMESPACE, startContainerd, type ContainerdHandle } from './containerd.js';
import { startControllerManager, startScheduler, type ControlPlaneComponentHandle } from './control-plane.js';
import { CriClient } from './cri.js';
import { startKubelet, type KubeletHandle } from './kubelet.js';
import { startKubeProxy, type KubeProxyHandle, type ProxyMode } from './kube-proxy.js';
import { checkNodeDir, nodeLayout } from './layout.js';
import { startNetworkPolicyController, type NetworkPolicyControllerHandle } from './network-policy.js';

/** The pause image the other images of the bed are built beside (imported, never pulled). */
export const DEFAULT_SANDBOX_IMAGE = 'localhost/ctrlmesh/pause:3.10';

export interface NodeOptions extends ToolOptions {
  /** The cluster to join: its kube-apiserver must have been started with `node: { address }`. */
  cluster: ApiServerHandle;
  /**
   * Holds every daemon's config, log and pid file (one subdirectory each), containerd's images and state, the
   * kubelet's root dir. Wiped at start. Put it one level below the bed's dir (`<bed>/node`), so
   * `ctrlmesh dev down` finds the daemons' pid files.
   */
  dir: string;
  /** The Node's name; default `<cluster>-node`. */
  nodeName?: string;
  /** The pause image of every pod sandbox; default localhost/ctrlmesh/pause:3.10. Never pulled. */
  sandboxImage?: string;
  /** kube-proxy's mode; default iptables. */
  proxyMode?: ProxyMode;
  /** Enforce NetworkPolicies (kube-router's firewall, network-policy.ts), as a cluster's CNI would; default true. */
  networkPolicies?: boolean;
  logger?: Logger;
  signal?: AbortSignal;
}

export interface NodeKubeconfigs {
  kubelet: string;
  kubeProxy: string;
  controllerManager: string;
  scheduler: string;
}

export interface NodeHandle {
  name: string;
  /** The node's IPv4 (InternalIP). */
  address: string;
  dir: string;
  /** containerd's socket path (for `ctr --address`, crictl's --runtime-endpoint unix://...). */
  containerdAddress: string;
  /** `ctr --address <socket> --namespace k8s.io <args>` (another namespace with `namespace`); resolves stdout. */
  ctr(args: readonly string[], options?: { namespace?: string; timeoutMs?: number }): Promise<string>;
  kubeconfigs: NodeKubeconfigs;
  /** Each daemon's lifecycle (stop/start/pid/logFile), e.g. to kill one in a fault test. */
  components: {
    containerd: ServerControl;
    controllerManager: ServerControl;
    scheduler: ServerControl;
    kubelet: ServerControl;
    kubeProxy: ServerControl;
    /** Absent with `networkPolicies: false`. */
    networkPolicies?: ServerControl;
  };
  /** Stops every daemon, tears every pod down and removes what they left on the host (processes, mounts, rules). */
  stop(): Promise<void>;
  /** Stops and starts the kubelet; pods keep running meanwhile. Resolves once the Node is Ready again. */
  restartKubelet(): Promise<void>;
  /** Stops and starts containerd; containers keep running under their shims and are found again. */
  restartContainerd(): Promise<void>;
}

export interface NodeCleanupReport {
  containers: number;
  shims: number;
  iptablesRules: number;
  mounts: number;
  cgroups: number;
  logLinks: number;
  /** KUBE-* iptables chains and kube-proxy nftables tables (0 when another kubelet or kube-proxy runs on the host). */
  kubeRules: number;
  /** kube-router's ipsets (0 when another node process runs on the host). */
  kubeRouterSets: number;
  /** The pod bridge ctrlmesh0 (1 when it was there). */
  bridge: number;
}

const CLEANUP_LABELS: Record<keyof NodeCleanupReport, string> = {
  containers: 'containers (runc)',
  shims: 'containerd shims',
  iptablesRules: 'CNI iptables rules and chains',
  mounts: 'mounts',
  cgroups: 'pod cgroups',
  logLinks: '/var/log/containers links',
  kubeRules: 'KUBE-* iptables chains or nftables tables',
  kubeRouterSets: 'kube-router ipsets',
  bridge: `bridge ${POD_BRIDGE}`,
};

/** What a cleanup removed, as one progress line's worth of text; undefined when it found nothing. */
export function describeCleanup(report: NodeCleanupReport): string | undefined {
  const parts = (Object.keys(CLEANUP_LABELS) as (keyof NodeCleanupReport)[]).filter((k) => report[k] > 0).map((k) => `${report[k]} ${CLEANUP_LABELS[k]}`);
  return parts.length ? parts.join(', ') : undefined;
}

/**
 * Removes what a node in `dir` left on the host once its daemons are gone (a crash, a killed test run): its
 * containers (runc, under our runc root), their shims (by `-address <our socket>`), the CNI plugins' iptables rules
 * for its sandboxes, every mount under its dir, its pods' cgroups, /var/log/containers links into its logs.
 * containerd must not be running. `ctrlmesh dev down` can call it after stopping the daemons.
 */
export async function cleanupNodeLeftovers(dir: string): Promise<NodeCleanupReport> {
  const layout = nodeLayout(resolve(dir));
  const sandboxIds = await criSandboxIds(layout.containerd.state);
  const containers = await deleteRuncContainers(join(layout.containerd.runcRoot, CRI_NAMESPACE));
  const shims = await killShims(layout.containerd.address);
  const iptablesRules = await removeCniLeftovers(CNI_NETWORK_NAME, [...new Set([...sandboxIds, ...containers])]);
  // A shim killed by SIGKILL leaves its socket, /run/containerd/s/<sha256(<containerd socket>/<namespace>/<sandbox id>)>.
  for (const id of sandboxIds) {
    const hash = createHash('sha256').update(join(layout.containerd.address, CRI_NAMESPACE, id)).digest('hex');
    await rm(join('/run/containerd/s', hash), { force: true });
  }
  const podUids = await kubeletPodUids(layout.kubelet.rootDir);
  const mounts = await unmountUnder([layout.dir]);
  const cgroups = await removePodCgroups(podUids);
  const logLinks = await removeContainerLogLinks(layout.kubelet.podLogsDir);
  const kubeRules = (await removeKubeRules()) ?? 0;
  const kubeRouterSets = (await removeKubeRouterSets()) ?? 0;
  // Its veths went with the pods' network namespaces.
  const bridge = (await removeBridge(POD_BRIDGE)) ? 1 : 0;
  return { containers: containers.length, shims: shims.length, iptablesRules, mounts: mounts.length, cgroups, logLinks, kubeRules, kubeRouterSets, bridge };
}

/** Stops and removes every pod sandbox through the CRI: containerd runs CNI DEL, kills containers, unmounts. */
async function removeAllPods(containerd: ContainerdHandle, onProgress: (message: string) => void): Promise<void> {
  const cri = await CriClient.connect(containerd.address);
  try {
    const sandboxes = await cri.listPodSandboxes();
    if (sandboxes.length === 0) return;
    const started = Date.now();
    for (const sandbox of sandboxes) {
      await cri.stopPodSandbox(sandbox.id);
      await cri.removePodSandbox(sandbox.id);
    }
    onProgress(`removed ${sandboxes.length} pod sandbox(es) through the CRI in ${Date.now() - started} ms: ${sandboxes.map((s) => s.name).join(', ')}`);
  } finally {
    cri.close();
  }
}

/**
 * A real node for one cluster of the test bed: containerd with runc and CNI bridge networking, the cluster's
 * kube-controller-manager and kube-scheduler, a kubelet, kube-proxy and (unless `networkPolicies: false`)
 * kube-router's NetworkPolicy firewall. Started in dependency order, each ready
 * before the next; on any failure everything started is stopped and cleaned up again. Needs root.
 */
export async function startNode(options: NodeOptions): Promise<NodeHandle> {
  const { cluster, logger, signal } = options;
  const onProgress = options.onProgress ?? (() => undefined);
  const dir = resolve(options.dir);
  checkNodeDir(dir);
  const layout = nodeLayout(dir);
  const name = options.nodeName ?? `${cluster.name}-node`;
  const sandboxImage = options.sandboxImage ?? DEFAULT_SANDBOX_IMAGE;
  if (process.getuid?.() !== 0) throw new TestbedError('a real node (containerd, kubelet, kube-proxy) needs root: run as root');
  if (cluster.nodeAddress === undefined) {
    throw new TestbedError(`kube-apiserver ${cluster.name} was started without the node option (startApiServer({ node: { address } })): pods could not reach it`);
  }
  const address = cluster.nodeAddress;
  const host = nodeAddress(undefined, [POD_BRIDGE]);
  if (host.address !== address) onProgress(`node ${name}: the API server advertises ${address}, the host's first address is ${host.address}; using ${address}`);

  // An earlier node in this dir may have died without stopping (its daemons died with it, by --pdeathsig KILL).
  const earlier = describeCleanup(await cleanupNodeLeftovers(dir));
  if (earlier) onProgress(`node ${name}: cleaned what an earlier node in ${dir} left: ${earlier}`);
  await rm(dir, { recursive: true, force: true });

  // One at a time: a missing binary is built, and two k8s builds at once would starve a 2-core machine.
  const tools = { env: options.env, onProgress, signal };
  const binaries = {
    kubelet: (await resolveTool('kubelet', tools)).path,
    kubeProxy: (await resolveTool('kube-proxy', tools)).path,
    scheduler: (await resolveTool('kube-scheduler', tools)).path,
    controllerManager: (await resolveTool('kube-controller-manager', tools)).path,
    kubeRouter: options.networkPolicies === false ? undefined : (await resolveTool('kube-router', tools)).path,
  };

  await enableForwarding(onProgress);
  const lowerOom = await mayLowerOomScore();
  if (!lowerOom) {
    onProgress(
      `node ${name}: this host's root lacks CAP_SYS_RESOURCE (no oom_score_adj below 0): containerd clamps containers' ` +
        'oom_score_adj (restrict_oom_score_adj), the kubelet and kube-proxy keep 0',
    );
  }
  const oomScoreAdj = lowerOom ? undefined : 0;
  const mtu = await interfaceMtu(host.interfaceName);
  await writeCniConfig(layout.cniConfDir, { ipamDataDir: layout.ipamDataDir, mtu });

  let containerd: ContainerdHandle | undefined;
  let controllerManager: ControlPlaneComponentHandle | undefined;
  let scheduler: ControlPlaneComponentHandle | undefined;
  let kubelet: KubeletHandle | undefined;
  let kubeProxy: KubeProxyHandle | undefined;
  let networkPolicies: NetworkPolicyControllerHandle | undefined;

  const stop = async (): Promise<void> => {
    const started = Date.now();
    await Promise.all([kubeProxy?.stop(), networkPolicies?.stop(), scheduler?.stop(), controllerManager?.stop()]);
    await kubeProxy?.cleanup();
    await kubelet?.stop();
    if (containerd?.pid() !== undefined) {
      await removeAllPods(containerd, onProgress).catch((err: unknown) =>
        onProgress(`node ${name}: tearing pods down through the CRI failed (${(err as Error).message}); cleaning up by hand`),
      );
    }
    await containerd?.stop();
    const left = describeCleanup(await cleanupNodeLeftovers(dir));
    // The kubelet never unmounts pods' volumes nor removes pod cgroups at exit, and leaves its iptables chains.
    if (left) onProgress(`node ${name}: removed after the daemons stopped: ${left}`);
    onProgress(`node ${name} stopped in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  };

  const step = async <T>(what: string, start: () => Promise<T>): Promise<T> => {
    const started = Date.now();
    onProgress(`node ${name}: starting ${what}`);
    const result = await start();
    onProgress(`node ${name}: ${what} ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return result;
  };

  try {
    const common = { logger, signal, env: options.env };
    containerd = await step('containerd', () =>
      startContainerd({
        ...common,
        dir: layout.containerd.dir,
        sandboxImage,
        cniBinDir: CNI_BIN_DIR,
        cniConfDir: layout.cniConfDir,
        restrictOomScoreAdj: !lowerOom,
      }),
    );
    const images = (await containerd.ctr(['images', 'ls', '-q'])).split('\n');
    if (!images.includes(sandboxImage)) {
      onProgress(
        `node ${name}: the sandbox image ${sandboxImage} is not in containerd yet (nothing is pulled): pods start only once it is ` +
          `imported (importImages({ address: node.containerdAddress, ... }))`,
      );
    }
    const cp = { ...common, cluster };
    [controllerManager, scheduler] = await Promise.all([
      step('kube-controller-manager', () => startControllerManager({ ...cp, binary: binaries.controllerManager, dir: layout.controllerManager })),
      step('kube-scheduler', () => startScheduler({ ...cp, binary: binaries.scheduler, dir: layout.scheduler })),
    ]);
    const kubeletStarted = Date.now();
    kubelet = await step('kubelet (ready = Node Ready)', () =>
      startKubelet({
        ...cp,
        binary: binaries.kubelet,
        dir: layout.kubelet.dir,
        nodeName: name,
        address,
        containerdAddress: layout.containerd.address,
        rootDir: layout.kubelet.rootDir,
        podLogsDir: layout.kubelet.podLogsDir,
        volumePluginDir: layout.kubelet.volumePluginDir,
        oomScoreAdj,
      }),
    );
    logger?.debug({ node: name, readyMs: Date.now() - kubeletStarted }, 'node Ready');
    kubeProxy = await step(`kube-proxy (${options.proxyMode ?? 'iptables'} mode)`, () =>
      startKubeProxy({ ...cp, binary: binaries.kubeProxy, dir: layout.kubeProxy, nodeName: name, mode: options.proxyMode, oomScoreAdj }),
    );
    const kubeRouter = binaries.kubeRouter;
    if (kubeRouter !== undefined) {
      // After the kubelet: it reads its Node (the node's address) at start.
      networkPolicies = await step('NetworkPolicy enforcement (kube-router, firewall only)', () =>
        startNetworkPolicyController({ ...cp, binary: kubeRouter, dir: layout.kubeRouter, nodeName: name }),
      );
    }
  } catch (err) {
    await stop().catch((stopErr: unknown) => logger?.warn({ err: stopErr }, `node ${name}: cleanup after a failed start failed`));
    throw err;
  }

  const ctd = containerd;
  const kl = kubelet;
  return {
    name,
    address,
    dir,
    containerdAddress: ctd.address,
    ctr: (args, opts) => ctd.ctr(args, opts),
    kubeconfigs: {
      kubelet: kl.kubeconfigPath,
      kubeProxy: kubeProxy.kubeconfigPath,
      controllerManager: controllerManager.kubeconfigPath,
      scheduler: scheduler.kubeconfigPath,
    },
    components: { containerd: ctd, controllerManager, scheduler, kubelet: kl, kubeProxy, ...(networkPolicies ? { networkPolicies } : {}) },
    stop,
    restartKubelet: async () => {
      const started = Date.now();
      await kl.stop();
      await kl.start();
      onProgress(`node ${name}: kubelet restarted, Node Ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    },
    restartContainerd: async () => {
      const started = Date.now();
      await ctd.stop();
      await ctd.start();
      onProgress(`node ${name}: containerd restarted in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    },
  };
}
