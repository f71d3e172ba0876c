import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';
import { TestbedError } from '../../errors.js';

export interface NodeAddress {
  /** The node's IPv4: kubelet's --node-ip, kube-apiserver's --advertise-address (the `kubernetes` Service's endpoint). */
  address: string;
  /** The interface that holds it, e.g. eth0 (its MTU is the pods' MTU). */
  interfaceName: string;
}

/**
 * The node's IPv4: the first non-internal IPv4 address of the host's interfaces. Pods reach the API server through
 * it (127.0.0.1 inside a pod is the pod itself), so loopback will not do. `exclude` skips interfaces by name: the
 * node's own pod bridge, left from an earlier run, must never be taken for the node.
 */
export function nodeAddress(
  interfaces: NodeJS.Dict<NetworkInterfaceInfo[]> = networkInterfaces(),
  exclude: readonly string[] = [],
): NodeAddress {
  const seen: string[] = [];
  for (const [interfaceName, addresses] of Object.entries(interfaces)) {
    for (const info of addresses ?? []) {
      seen.push(`${interfaceName} ${info.family} ${info.address}${info.internal ? ' (internal)' : ''}`);
      if (info.family === 'IPv4' && !info.internal && !exclude.includes(interfaceName)) return { address: info.address, interfaceName };
    }
  }
  throw new TestbedError(
    `a real node needs a non-internal IPv4 address for pods to reach the API server, and none was found; interfaces: ${seen.join(', ') || 'none'}`,
  );
}
