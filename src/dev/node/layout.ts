import { join } from 'node:path';
import { TestbedError } from '../../errors.js';
import { containerdPaths, type ContainerdPaths } from './containerd.js';

/**
 * The longest node dir: the kubelet creates unix sockets under its root dir (<dir>/kubelet/root/pod-resources/
 * <10 digits>, device-plugins/kubelet.sock), and a unix socket path holds at most 107 bytes; longer fails with
 * "listen unix ...: bind: invalid argument". mkdtemp under /tmp gives about 30.
 */
export const MAX_NODE_DIR_BYTES = 64;

export function checkNodeDir(dir: string): void {
  const length = Buffer.byteLength(dir);
  if (length > MAX_NODE_DIR_BYTES) {
    throw new TestbedError(
      `a node's dir may be at most ${MAX_NODE_DIR_BYTES} bytes (the kubelet and containerd make unix sockets under it, whose paths are ` +
        `limited to 107 bytes), and ${dir} has ${length}: use a shorter one`,
    );
  }
}

/**
 * Where a node keeps everything, one subdirectory per daemon (each with its log and pid file, so `ctrlmesh dev
 * down` finds them one level below the node's dir). Both the start and the cleanup after a crash read it.
 */
export interface NodeLayout {
  dir: string;
  containerd: { dir: string } & ContainerdPaths;
  /** containerd's CNI conf_dir: the one conflist. */
  cniConfDir: string;
  /** host-local's IP reservations. */
  ipamDataDir: string;
  kubelet: {
    dir: string;
    /** --root-dir: pods' volumes (mounted), plugins, the kubelet's self-signed serving certificate. */
    rootDir: string;
    /** podLogsDir: instead of the host's /var/log/pods. */
    podLogsDir: string;
    /** volumePluginDir: instead of /usr/libexec/kubernetes/kubelet-plugins. */
    volumePluginDir: string;
  };
  controllerManager: string;
  scheduler: string;
  kubeProxy: string;
  kubeRouter: string;
}

export function nodeLayout(dir: string): NodeLayout {
  const containerdDir = join(dir, 'containerd');
  const kubeletDir = join(dir, 'kubelet');
  return {
    dir,
    containerd: { dir: containerdDir, ...containerdPaths(containerdDir) },
    cniConfDir: join(dir, 'cni'),
    ipamDataDir: join(dir, 'cni-ipam'),
    kubelet: {
      dir: kubeletDir,
      rootDir: join(kubeletDir, 'root'),
      podLogsDir: join(kubeletDir, 'pod-logs'),
      volumePluginDir: join(kubeletDir, 'volume-plugins'),
    },
    controllerManager: join(dir, 'controller-manager'),
    scheduler: join(dir, 'scheduler'),
    kubeProxy: join(dir, 'kube-proxy'),
    kubeRouter: join(dir, 'kube-router'),
  };
}
