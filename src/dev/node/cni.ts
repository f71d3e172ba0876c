import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { TestbedError } from '../../errors.js';
import { run, tryRun } from './exec.js';

/** The CNI network's name: also the `name: "ctrlmesh"` the bridge plugin writes into its iptables comments. */
export const CNI_NETWORK_NAME = 'ctrlmesh';
/** The Linux bridge pods attach to. */
export const POD_BRIDGE = 'ctrlmesh0';
/** The one node's pod range, handed out by host-local. */
export const POD_SUBNET = '10.244.0.0/24';
/** The cluster's pod range (kube-proxy's --cluster-cidr: traffic from outside it to a Service is masqueraded). */
export const CLUSTER_CIDR = '10.244.0.0/16';
/** Debian's containernetworking-plugins install here (not /opt/cni/bin). */
export const CNI_BIN_DIR = '/usr/lib/cni';

export interface CniOptions {
  /** host-local's reservations: under the node's dir, so every bed starts with the whole range free. */
  ipamDataDir: string;
  bridge?: string;
  subnet?: string;
  /** The host interface's MTU: a bridge at 1500 on a 1400 link would drop large packets leaving the host. */
  mtu?: number;
}

/**
 * The network containerd's CRI plugin gives each pod: a veth on the bridge `ctrlmesh0`, which is the pods'
 * gateway (isGateway) and masquerades their traffic leaving the pod range (ipMasq); hairpinMode lets a pod reach
 * itself through a Service. portmap serves hostPort. No loopback entry: containerd sets up each pod's `lo` itself
 * with the loopback plugin from the same bin_dir, and a chained loopback would be handed the pod's eth0.
 */
export function cniConfList(options: CniOptions): Record<string, unknown> {
  return {
    // The newest version both containerd 1.6 (libcni 1.1) and Debian's plugins 1.1.1 speak.
    cniVersion: '1.0.0',
    name: CNI_NETWORK_NAME,
    plugins: [
      {
        type: 'bridge',
        bridge: options.bridge ?? POD_BRIDGE,
        isGateway: true,
        ipMasq: true,
        hairpinMode: true,
        ...(options.mtu === undefined ? {} : { mtu: options.mtu }),
        ipam: {
          type: 'host-local',
          ranges: [[{ subnet: options.subnet ?? POD_SUBNET }]],
          routes: [{ dst: '0.0.0.0/0' }],
          dataDir: options.ipamDataDir,
        },
      },
      { type: 'portmap', capabilities: { portMappings: true } },
    ],
  };
}

/** Writes the one conflist of `confDir` (containerd loads the first file there, max_conf_num = 1). */
export async function writeCniConfig(confDir: string, options: CniOptions): Promise<string> {
  await mkdir(confDir, { recursive: true });
  await mkdir(options.ipamDataDir, { recursive: true });
  const path = join(confDir, '10-ctrlmesh.conflist');
  await writeFile(path, `${JSON.stringify(cniConfList(options), null, 2)}\n`);
  return path;
}

/** The MTU of a host interface, undefined if it cannot be read. */
export async function interfaceMtu(name: string): Promise<number | undefined> {
  const text = await readFile(`/sys/class/net/${name}/mtu`, 'utf8').catch(() => undefined);
  const mtu = text === undefined ? NaN : Number.parseInt(text, 10);
  return Number.isFinite(mtu) ? mtu : undefined;
}

const SYSCTLS = [
  // Pods' packets are routed by the host between the bridge and eth0 (and to Services' endpoints).
  { key: 'net.ipv4.ip_forward', path: '/proc/sys/net/ipv4/ip_forward' },
  // Bridged pod-to-pod traffic must pass iptables, or a Service whose endpoint is on the same bridge is never DNATed back.
  { key: 'net.bridge.bridge-nf-call-iptables', path: '/proc/sys/net/bridge/bridge-nf-call-iptables' },
];

/**
 * Sets the host sysctls pods need, reporting what changed. They are host-wide and left on at stop: other
 * software may rely on them too, and turning forwarding off under a running workload breaks it.
 */
export async function enableForwarding(onProgress: (message: string) => void): Promise<void> {
  const changes: string[] = [];
  for (const { key, path } of SYSCTLS) {
    const before = (await readFile(path, 'utf8').catch(() => undefined))?.trim();
    if (before === undefined) {
      throw new TestbedError(
        `${path} is missing: a real node needs ${key} (${key.startsWith('net.bridge') ? 'load the br_netfilter module: modprobe br_netfilter' : 'IPv4 forwarding'})`,
      );
    }
    if (before === '1') continue;
    await writeFile(path, '1\n').catch((err: unknown) => {
      throw new TestbedError(`cannot set ${key}=1 by writing ${path} (the node runs as root): ${(err as Error).message}`, { cause: err });
    });
    changes.push(`${key}=1 (was ${before})`);
  }
  onProgress(
    changes.length
      ? `set ${changes.join(' and ')} by writing /proc/sys: pods are routed through the host; left on at stop`
      : 'net.ipv4.ip_forward and net.bridge.bridge-nf-call-iptables are already 1',
  );
}

/** Deletes the pod bridge (veths went with their pods' network namespaces); resolves whether it was there. */
export async function removeBridge(name = POD_BRIDGE): Promise<boolean> {
  const shown = await tryRun('ip', ['link', 'show', name]);
  if (shown.code !== 0) return false;
  await run('ip', ['link', 'delete', name]);
  return true;
}
