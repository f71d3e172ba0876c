import { describe, expect, it } from 'vitest';
import { nodeAddress } from '../../../src/dev/node/address.js';
import { CAP_SYS_RESOURCE, hasCapability } from '../../../src/dev/node/capabilities.js';
import { cniConfList, POD_BRIDGE, POD_SUBNET } from '../../../src/dev/node/cni.js';
import { containerdConfigText, containerdPaths } from '../../../src/dev/node/containerd.js';
import { schedulerConfig } from '../../../src/dev/node/control-plane.js';
import { nodeIsReady } from '../../../src/dev/node/https.js';
import { kubeletConfig, podResolvConf } from '../../../src/dev/node/kubelet.js';
import { kubeProxyConfig } from '../../../src/dev/node/kube-proxy.js';
import { checkNodeDir, MAX_NODE_DIR_BYTES, nodeLayout } from '../../../src/dev/node/layout.js';

const iface = (address: string, family: 'IPv4' | 'IPv6', internal = false) => ({
  address,
  family,
  internal,
  netmask: family === 'IPv4' ? '255.255.255.0' : 'ffff:ffff:ffff:ffff::',
  mac: '00:00:00:00:00:00',
  cidr: null,
  ...(family === 'IPv6' ? { scopeid: 0 } : {}),
});

describe('node address', () => {
  it('takes the first non-internal IPv4, skipping excluded interfaces', () => {
    const interfaces = {
      lo: [iface('127.0.0.1', 'IPv4', true)],
      [POD_BRIDGE]: [iface('10.244.0.1', 'IPv4')],
      eth0: [iface('fe80::1', 'IPv6'), iface('192.0.2.2', 'IPv4')],
      eth1: [iface('198.51.100.7', 'IPv4')],
    } as unknown as Parameters<typeof nodeAddress>[0];
    expect(nodeAddress(interfaces, [POD_BRIDGE])).toEqual({ address: '192.0.2.2', interfaceName: 'eth0' });
  });

  it('names what it found when there is no usable address', () => {
    const interfaces = { lo: [iface('127.0.0.1', 'IPv4', true)], eth0: [iface('fe80::1', 'IPv6')] } as unknown as Parameters<typeof nodeAddress>[0];
    expect(() => nodeAddress(interfaces)).toThrow(/lo IPv4 127\.0\.0\.1 \(internal\), eth0 IPv6 fe80::1/);
  });
});

describe('containerd config', () => {
  it('keeps the socket, data, state and runc state under its dir', () => {
    expect(containerdPaths('/tmp/bed/node/containerd')).toEqual({
      address: '/tmp/bed/node/containerd/containerd.sock',
      root: '/tmp/bed/node/containerd/root',
      state: '/tmp/bed/node/containerd/state',
      runcRoot: '/tmp/bed/node/containerd/state/runc',
    });
  });

  it('renders CRI with overlayfs, cgroupfs runc, our pause image, CNI dirs and netns under the state dir', () => {
    const text = containerdConfigText({
      ...containerdPaths('/n/containerd'),
      sandboxImage: 'localhost/ctrlmesh/pause:3.10',
      cniBinDir: '/usr/lib/cni',
      cniConfDir: '/n/cni',
    });
    expect(text).toMatch(/^version = 2$/m);
    expect(text).toContain('root = "/n/containerd/root"');
    expect(text).toContain('state = "/n/containerd/state"');
    expect(text).toContain('address = "/n/containerd/containerd.sock"');
    expect(text).toContain('sandbox_image = "localhost/ctrlmesh/pause:3.10"');
    expect(text).toContain('netns_mounts_under_state_dir = true');
    expect(text).toContain('snapshotter = "overlayfs"');
    expect(text).toContain('SystemdCgroup = false');
    expect(text).toContain('Root = "/n/containerd/state/runc"');
    expect(text).toContain('bin_dir = "/usr/lib/cni"');
    expect(text).toContain('conf_dir = "/n/cni"');
    expect(text).toContain('"io.containerd.internal.v1.opt"');
    expect(text).not.toContain('restrict_oom_score_adj');
    expect(containerdConfigText({ ...containerdPaths('/n'), sandboxImage: 'p', cniBinDir: 'b', cniConfDir: 'c', restrictOomScoreAdj: true })).toContain(
      'restrict_oom_score_adj = true',
    );
  });

  it('escapes strings as TOML basic strings', () => {
    const text = containerdConfigText({ ...containerdPaths('/n'), sandboxImage: 'a"b\\c', cniBinDir: 'b', cniConfDir: 'c' });
    expect(text).toContain('sandbox_image = "a\\"b\\\\c"');
  });
});

describe('CNI config', () => {
  it('is a bridge network with host-local IPAM on the pod subnet, then portmap', () => {
    const conf = cniConfList({ ipamDataDir: '/n/cni-ipam', mtu: 1400 }) as { cniVersion: string; name: string; plugins: Record<string, unknown>[] };
    expect(conf.cniVersion).toBe('1.0.0');
    expect(conf.name).toBe('ctrlmesh');
    expect(conf.plugins.map((p) => p.type)).toEqual(['bridge', 'portmap']);
    expect(conf.plugins[0]).toMatchObject({
      bridge: 'ctrlmesh0',
      isGateway: true,
      ipMasq: true,
      hairpinMode: true,
      mtu: 1400,
      ipam: { type: 'host-local', ranges: [[{ subnet: POD_SUBNET }]], dataDir: '/n/cni-ipam' },
    });
    expect(conf.plugins[1]).toEqual({ type: 'portmap', capabilities: { portMappings: true } });
    expect(cniConfList({ ipamDataDir: '/x' }).plugins).not.toContainEqual(expect.objectContaining({ mtu: expect.anything() }));
  });
});

describe('kubelet config', () => {
  const base = {
    clientCaFile: '/n/kubelet/ca.crt',
    containerRuntimeEndpoint: 'unix:///n/containerd/containerd.sock',
    address: '192.0.2.2',
    port: 40001,
    healthzPort: 40002,
    resolvConf: '/n/kubelet/resolv.conf',
    podLogsDir: '/n/kubelet/pod-logs',
    volumePluginDir: '/n/kubelet/volume-plugins',
  };

  it('uses cgroupfs, x509 + webhook authentication without anonymous, webhook authorization, loose eviction, no image GC', () => {
    const config = kubeletConfig(base);
    expect(config).toMatchObject({
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      cgroupDriver: 'cgroupfs',
      cgroupsPerQOS: true,
      enforceNodeAllocatable: ['pods'],
      failSwapOn: false,
      failCgroupV1: false,
      authentication: { x509: { clientCAFile: base.clientCaFile }, webhook: { enabled: true }, anonymous: { enabled: false } },
      authorization: { mode: 'Webhook' },
      containerRuntimeEndpoint: base.containerRuntimeEndpoint,
      serializeImagePulls: false,
      evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '1%', 'imagefs.available': '1%' },
      imageGCHighThresholdPercent: 100,
      readOnlyPort: 0,
      healthzBindAddress: '127.0.0.1',
      resolvConf: base.resolvConf,
      podLogsDir: base.podLogsDir,
    });
    expect(config).not.toHaveProperty('staticPodPath');
    expect(config).not.toHaveProperty('oomScoreAdj');
    expect(kubeletConfig({ ...base, oomScoreAdj: 0 })).toHaveProperty('oomScoreAdj', 0);
  });

  it('drops loopback nameservers from the pods\' resolv.conf and keeps the rest', () => {
    const host = 'nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch example.org\nnameserver ::1\n';
    const pods = podResolvConf(host);
    expect(pods).not.toMatch(/^nameserver/m);
    expect(pods).toContain('options edns0 trust-ad\nsearch example.org\n');
    expect(podResolvConf('nameserver 10.255.255.53\n')).toContain('nameserver 10.255.255.53\n');
  });

  it('reads Node readiness from the Ready condition', () => {
    const node = (status: string) => JSON.stringify({ status: { conditions: [{ type: 'MemoryPressure', status: 'False' }, { type: 'Ready', status }] } });
    expect(nodeIsReady(node('True'))).toBe(true);
    expect(nodeIsReady(node('False'))).toBe(false);
    expect(nodeIsReady('{}')).toBe(false);
  });
});

describe('kube-proxy and kube-scheduler config', () => {
  it('runs kube-proxy in the chosen mode on loopback ports, leaving host conntrack settings alone', () => {
    const config = kubeProxyConfig({ kubeconfigPath: '/k', nodeName: 'n', mode: 'iptables', healthzPort: 1, metricsPort: 2 });
    expect(config).toMatchObject({
      kind: 'KubeProxyConfiguration',
      mode: 'iptables',
      clusterCIDR: '10.244.0.0/16',
      hostnameOverride: 'n',
      clientConnection: { kubeconfig: '/k' },
      healthzBindAddress: '127.0.0.1:1',
      metricsBindAddress: '127.0.0.1:2',
      conntrack: { maxPerCore: 0 },
      iptables: { localhostNodePorts: false },
    });
    expect(kubeProxyConfig({ kubeconfigPath: '/k', nodeName: 'n', mode: 'nftables', healthzPort: 1, metricsPort: 2 }).mode).toBe('nftables');
  });

  it('runs kube-scheduler from a config file without leader election', () => {
    expect(schedulerConfig('/s/kubeconfig')).toEqual({
      apiVersion: 'kubescheduler.config.k8s.io/v1',
      kind: 'KubeSchedulerConfiguration',
      clientConnection: { kubeconfig: '/s/kubeconfig' },
      leaderElection: { leaderElect: false },
    });
  });
});

describe('node layout and capabilities', () => {
  it('gives each daemon a subdirectory of the node dir', () => {
    const layout = nodeLayout('/bed/node');
    expect(layout.containerd.address).toBe('/bed/node/containerd/containerd.sock');
    expect(layout.kubelet.rootDir).toBe('/bed/node/kubelet/root');
    expect(layout.cniConfDir).toBe('/bed/node/cni');
    expect([layout.controllerManager, layout.scheduler, layout.kubeProxy]).toEqual(['/bed/node/controller-manager', '/bed/node/scheduler', '/bed/node/kube-proxy']);
  });

  it('refuses a dir too long for the unix sockets the kubelet makes under it', () => {
    const longest = `/${'x'.repeat(MAX_NODE_DIR_BYTES - 1)}`;
    expect(() => checkNodeDir(longest)).not.toThrow();
    // The kubelet's longest socket: <root-dir>/pod-resources/<10 digits>.
    expect(Buffer.byteLength(`${nodeLayout(longest).kubelet.rootDir}/pod-resources/1234567890`)).toBeLessThanOrEqual(107);
    expect(() => checkNodeDir(`${longest}x`)).toThrow(/at most 64 bytes/);
  });

  it('reads CAP_SYS_RESOURCE from the effective set', () => {
    expect(hasCapability('Name:\tx\nCapEff:\t000001ffffffffff\n', CAP_SYS_RESOURCE)).toBe(true);
    // This VM's set: every capability but CAP_SYS_RESOURCE (bit 24).
    expect(hasCapability('CapEff:\t000001fffeffffff\n', CAP_SYS_RESOURCE)).toBe(false);
    expect(hasCapability('no caps here', CAP_SYS_RESOURCE)).toBe(false);
  });
});
