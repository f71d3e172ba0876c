import { describe, expect, it } from 'vitest';
import {
  cniLeftoverRestoreScript,
  isShimOf,
  kubeChainsRestoreScript,
  mountsUnder,
  parseMountPoints,
} from '../../../src/dev/node/cleanup.js';
import { decodeFields, decodePodSandboxes, encodeStringFields, encodeVarint, grpcFrame } from '../../../src/dev/node/cri.js';

const MOUNTINFO = [
  '22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw',
  '90 22 254:0 /tmp/bed/node/kubelet/root /tmp/bed/node/kubelet/root rw,relatime shared:40 - ext4 /dev/vda rw',
  '91 90 0:50 / /tmp/bed/node/kubelet/root/pods/u1/volumes/kubernetes.io~projected/kube-api-access-x rw shared:41 - tmpfs tmpfs rw',
  '92 22 0:51 / /tmp/bed/node/containerd/state/netns/cni-1 rw shared:42 - nsfs nsfs rw',
  '93 22 0:52 / /tmp/bed/node-other/x rw shared:43 - tmpfs tmpfs rw',
  '94 22 0:53 / /tmp/bed/node/with\\040space rw shared:44 - tmpfs tmpfs rw',
  '',
].join('\n');

describe('mounts', () => {
  it('reads mount points, undoing the octal escapes', () => {
    expect(parseMountPoints(MOUNTINFO)).toContain('/tmp/bed/node/with space');
  });

  it('lists mounts under a dir (not a sibling sharing its prefix), last mounted first', () => {
    expect(mountsUnder(MOUNTINFO, ['/tmp/bed/node'])).toEqual([
      '/tmp/bed/node/with space',
      '/tmp/bed/node/containerd/state/netns/cni-1',
      '/tmp/bed/node/kubelet/root/pods/u1/volumes/kubernetes.io~projected/kube-api-access-x',
      '/tmp/bed/node/kubelet/root',
    ]);
    expect(mountsUnder(MOUNTINFO, ['/elsewhere'])).toEqual([]);
  });
});

describe('shims', () => {
  it('recognises a shim of our containerd by its -address argument', () => {
    const argv = ['/usr/bin/containerd-shim-runc-v2', '-namespace', 'k8s.io', '-id', 'abc', '-address', '/tmp/bed/node/containerd/containerd.sock', ''];
    expect(isShimOf(argv, '/tmp/bed/node/containerd/containerd.sock')).toBe(true);
    expect(isShimOf(argv, '/run/containerd/containerd.sock')).toBe(false);
    expect(isShimOf(['/usr/bin/containerd', '-address', '/tmp/bed/node/containerd/containerd.sock'], '/tmp/bed/node/containerd/containerd.sock')).toBe(false);
  });
});

describe('iptables leftovers', () => {
  const NAT = [
    '*nat',
    ':POSTROUTING ACCEPT [0:0]',
    ':CNI-aaa - [0:0]',
    ':CNI-bbb - [0:0]',
    ':CNI-HOSTPORT-DNAT - [0:0]',
    ':CNI-DN-aaa - [0:0]',
    '-A POSTROUTING -s 10.244.0.2/32 -m comment --comment "name: \\"ctrlmesh\\" id: \\"s1\\"" -j CNI-aaa',
    '-A POSTROUTING -s 10.244.0.3/32 -m comment --comment "name: \\"ctrlmesh\\" id: \\"s2\\"" -j CNI-bbb',
    '-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"ctrlmesh\\" id: \\"s1\\"" -j CNI-DN-aaa',
    '-A CNI-aaa -d 10.244.0.0/24 -m comment --comment "name: \\"ctrlmesh\\" id: \\"s1\\"" -j ACCEPT',
    '-A CNI-aaa ! -d 224.0.0.0/4 -m comment --comment "name: \\"ctrlmesh\\" id: \\"s1\\"" -j MASQUERADE',
    'COMMIT',
  ].join('\n');

  it("removes only the named sandboxes' rules and per-sandbox chains, keeping shared CNI-HOSTPORT chains", () => {
    expect(cniLeftoverRestoreScript(NAT, 'ctrlmesh', ['s1'])).toBe(
      [
        '*nat',
        '-D POSTROUTING -s 10.244.0.2/32 -m comment --comment "name: \\"ctrlmesh\\" id: \\"s1\\"" -j CNI-aaa',
        '-D CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \\"ctrlmesh\\" id: \\"s1\\"" -j CNI-DN-aaa',
        '-F CNI-aaa',
        '-F CNI-DN-aaa',
        '-X CNI-aaa',
        '-X CNI-DN-aaa',
        'COMMIT',
        '',
      ].join('\n'),
    );
    expect(cniLeftoverRestoreScript(NAT, 'ctrlmesh', ['nope'])).toBeUndefined();
    expect(cniLeftoverRestoreScript(NAT, 'other', ['s1'])).toBeUndefined();
    expect(cniLeftoverRestoreScript(NAT, 'ctrlmesh', [])).toBeUndefined();
  });

  it('removes KUBE-* chains and the jumps to them, table by table', () => {
    const save = [
      '*mangle',
      ':PREROUTING ACCEPT [0:0]',
      ':KUBE-IPTABLES-HINT - [0:0]',
      'COMMIT',
      '*filter',
      ':INPUT ACCEPT [0:0]',
      ':KUBE-FIREWALL - [0:0]',
      '-A INPUT -j KUBE-FIREWALL',
      '-A INPUT -s 1.2.3.4/32 -j DROP',
      '-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -j DROP',
      'COMMIT',
      '*raw',
      ':PREROUTING ACCEPT [0:0]',
      'COMMIT',
      '',
    ].join('\n');
    expect(kubeChainsRestoreScript(save)).toBe(
      [
        '*mangle',
        '-F KUBE-IPTABLES-HINT',
        '-X KUBE-IPTABLES-HINT',
        'COMMIT',
        '*filter',
        '-D INPUT -j KUBE-FIREWALL',
        '-F KUBE-FIREWALL',
        '-X KUBE-FIREWALL',
        'COMMIT',
        '',
      ].join('\n'),
    );
    expect(kubeChainsRestoreScript('*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n')).toBeUndefined();
  });
});

describe('CRI wire format', () => {
  it('encodes varints and string fields as protobuf does', () => {
    expect([...encodeVarint(1)]).toEqual([1]);
    expect([...encodeVarint(300)]).toEqual([0xac, 0x02]);
    // StopPodSandboxRequest{pod_sandbox_id: "ab"}: tag 0x0a (field 1, wire type 2), length 2.
    expect([...encodeStringFields({ 1: 'ab' })]).toEqual([0x0a, 2, 0x61, 0x62]);
    expect([...grpcFrame(Buffer.from([7, 8]))]).toEqual([0, 0, 0, 0, 2, 7, 8]);
  });

  it('decodes a ListPodSandboxResponse into ids, names and states', () => {
    const metadata = encodeStringFields({ 1: 'web', 2: 'uid-1', 3: 'default' });
    const sandbox = (id: string, state: number): Buffer =>
      Buffer.concat([encodeStringFields({ 1: id }), Buffer.from([0x12, metadata.length]), metadata, Buffer.from([0x18, state]), Buffer.from([0x20, 0x96, 0x01])]);
    const items = [sandbox('s1', 0), sandbox('s2', 1)];
    const response = Buffer.concat(items.flatMap((item) => [Buffer.from([0x0a, item.length]), item]));
    expect(decodePodSandboxes(response)).toEqual([
      { id: 's1', name: 'default/web', ready: true },
      { id: 's2', name: 'default/web', ready: false },
    ]);
    expect(decodeFields(Buffer.alloc(0))).toEqual([]);
    expect(() => decodeFields(Buffer.from([0x0a, 5, 1]))).toThrow(/truncated/);
  });
});
