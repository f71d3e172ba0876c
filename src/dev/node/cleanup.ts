import { readdir, readFile, readlink, rm, rmdir, unlink } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { TestbedError } from '../../errors.js';
import { isAlive } from '../process-alive.js';
import { tryRun } from './exec.js';

/*
 * What a node leaves on the host that its daemons' exits do not take along: container shims (they outlive
 * containerd on purpose, so a containerd restart keeps pods running) and the containers under them, mounts (pod
 * network namespaces, container root filesystems, pods' volumes, the kubelet's rshared bind of its root dir),
 * the CNI bridge plugin's per-pod masquerade rules, pod cgroups and /var/log/containers links. An orderly stop
 * tears pods down through the CRI first, so these run as a safety net, and alone after a crash.
 */

/** The mount points listed in /proc/self/mountinfo (field 5, with the kernel's octal escapes undone), in mount order. */
export function parseMountPoints(mountinfo: string): string[] {
  return mountinfo
    .split('\n')
    .map((line) => line.split(' ')[4])
    .filter((p): p is string => p !== undefined && p !== '')
    .map((p) => p.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8))));
}

const isUnder = (path: string, dir: string): boolean => path === dir || path.startsWith(dir.endsWith('/') ? dir : `${dir}/`);

/** Mount points at or under any of `dirs`, last mounted first (children before the mounts they sit on). */
export function mountsUnder(mountinfo: string, dirs: readonly string[]): string[] {
  return parseMountPoints(mountinfo)
    .filter((p) => dirs.some((d) => isUnder(p, d)))
    .reverse();
}

/** Unmounts everything at or under `dirs` (lazily when busy); returns what it unmounted. Throws if mounts stay. */
export async function unmountUnder(dirs: readonly string[]): Promise<string[]> {
  const done: string[] = [];
  // Several passes: a mount with shared propagation can reappear under a peer until its master is gone.
  for (let pass = 0; pass < 5; pass++) {
    const mounts = mountsUnder(await readFile('/proc/self/mountinfo', 'utf8'), dirs);
    if (mounts.length === 0) return done;
    for (const mount of mounts) {
      if ((await tryRun('umount', [mount])).code === 0 || (await tryRun('umount', ['-l', mount])).code === 0) done.push(mount);
    }
  }
  const left = mountsUnder(await readFile('/proc/self/mountinfo', 'utf8'), dirs);
  if (left.length) throw new TestbedError(`could not unmount ${left.join(', ')}`);
  return done;
}

/** Whether a process's argv is a containerd shim serving the containerd at `address` (`-address <address>`). */
export function isShimOf(argv: readonly string[], address: string): boolean {
  if (!basename(argv[0] ?? '').startsWith('containerd-shim')) return false;
  const at = argv.indexOf('-address');
  return at >= 0 && argv[at + 1] === address;
}

/** The pids of the shims started by the containerd at `address`, found through /proc/<pid>/cmdline. */
export async function shimPids(address: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (isShimOf(cmdline.split('\0'), address)) pids.push(Number(entry));
  }
  return pids;
}

/** SIGKILLs the shims of `address` and waits (up to 5 s) until they are gone. */
export async function killShims(address: string): Promise<number[]> {
  const pids = await shimPids(address);
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  const deadline = Date.now() + 5_000;
  while (pids.some(isAlive) && Date.now() < deadline) await sleep(50);
  return pids;
}

/** The containers runc knows under `root` (ours only: containerd's runc Root option points into the node's dir). */
export async function runcContainers(root: string): Promise<string[]> {
  const listed = await tryRun('runc', ['--root', root, 'list', '--format', 'json']);
  if (listed.code !== 0) return [];
  const parsed = JSON.parse(listed.stdout.trim() || 'null') as { id: string }[] | null;
  return (parsed ?? []).map((c) => c.id);
}

/** Kills and deletes every container runc has under `root` (all its processes, its cgroups); returns their ids. */
export async function deleteRuncContainers(root: string): Promise<string[]> {
  const ids = await runcContainers(root);
  for (const id of ids) await tryRun('runc', ['--root', root, 'delete', '--force', id]);
  return ids;
}

/** The sandbox ids containerd's CRI plugin recorded under its state dir (a sandbox id is the CNI container id). */
export async function criSandboxIds(stateDir: string): Promise<string[]> {
  return readdir(join(stateDir, 'io.containerd.grpc.v1.cri', 'sandboxes')).catch(() => []);
}

/**
 * An iptables-restore script (nat table, --noflush) removing what the CNI bridge and portmap plugins added for
 * these sandboxes and never took back (no CNI DEL ran): rules commented `name: "<network>" id: "<sandbox>"` and the
 * per-sandbox chains they jump to. Undefined when there is nothing to remove.
 */
export function cniLeftoverRestoreScript(natSave: string, network: string, sandboxIds: readonly string[]): string | undefined {
  if (sandboxIds.length === 0) return undefined;
  const tags = sandboxIds.map((id) => `name: \\"${network}\\" id: \\"${id}\\"`);
  const ours = natSave.split('\n').filter((line) => line.startsWith('-A ') && tags.some((tag) => line.includes(tag)));
  if (ours.length === 0) return undefined;
  // Per-sandbox chains (the bridge's CNI-<hash>, portmap's CNI-DN-<hash>); the CNI-HOSTPORT-* chains are shared.
  const chains = new Set<string>();
  for (const line of ours) {
    const target = / -j (CNI-[A-Za-z0-9-]+)/.exec(line)?.[1];
    if (target && !target.startsWith('CNI-HOSTPORT-')) chains.add(target);
  }
  const deletes = ours.filter((line) => !chains.has(line.split(' ')[1] ?? '')).map((line) => `-D ${line.slice(3)}`);
  return ['*nat', ...deletes, ...[...chains].map((c) => `-F ${c}`), ...[...chains].map((c) => `-X ${c}`), 'COMMIT', ''].join('\n');
}

/** Removes the CNI plugins' leftover nat rules for these sandboxes; returns how many rules and chains went. */
export async function removeCniLeftovers(network: string, sandboxIds: readonly string[]): Promise<number> {
  if (sandboxIds.length === 0) return 0;
  const saved = await tryRun('iptables-save', ['-t', 'nat']);
  if (saved.code !== 0) return 0;
  const script = cniLeftoverRestoreScript(saved.stdout, network, sandboxIds);
  if (!script) return 0;
  const restored = await tryRun('iptables-restore', ['--noflush'], { input: script });
  if (restored.code !== 0) throw new TestbedError(`removing leftover CNI iptables rules failed: ${restored.stderr.trim()}\nscript:\n${script}`);
  return script.split('\n').filter((l) => l.startsWith('-')).length;
}

/** Pods' UIDs: the kubelet keeps a directory per pod under <root-dir>/pods. */
export async function kubeletPodUids(kubeletRootDir: string): Promise<string[]> {
  return readdir(join(kubeletRootDir, 'pods')).catch(() => []);
}

async function rmdirTree(path: string): Promise<boolean> {
  const entries = await readdir(path, { withFileTypes: true }).catch(() => undefined);
  if (!entries) return false;
  for (const e of entries) if (e.isDirectory()) await rmdirTree(join(path, e.name));
  return rmdir(path).then(
    () => true,
    () => false,
  );
}

/**
 * Removes these pods' cgroups (cgroupfs driver: /kubepods[/besteffort|/burstable]/pod<uid> in every hierarchy), which
 * the kubelet deletes only for pods it saw go. The QoS cgroups stay: another kubelet on the host may use them.
 */
export async function removePodCgroups(podUids: readonly string[], cgroupRoot = '/sys/fs/cgroup'): Promise<number> {
  if (podUids.length === 0) return 0;
  let removed = 0;
  const hierarchies = await readdir(cgroupRoot).catch(() => []);
  for (const h of hierarchies) {
    for (const qos of ['', 'besteffort', 'burstable']) {
      for (const uid of podUids) if (await rmdirTree(join(cgroupRoot, h, 'kubepods', qos, `pod${uid}`))) removed++;
    }
  }
  return removed;
}

/** Removes the kubelet's /var/log/containers links into our podLogsDir (the link dir is fixed in the kubelet). */
export async function removeContainerLogLinks(podLogsDir: string, linkDir = '/var/log/containers'): Promise<number> {
  let removed = 0;
  for (const entry of await readdir(linkDir).catch(() => [])) {
    const target = await readlink(join(linkDir, entry)).catch(() => undefined);
    if (target !== undefined && isUnder(target, podLogsDir)) {
      await unlink(join(linkDir, entry)).catch(() => undefined);
      removed++;
    }
  }
  return removed;
}

/** Removes a directory tree that may hold mount points: unmounts first, so rm never descends into a mounted filesystem. */
export async function removeTree(dir: string): Promise<void> {
  await unmountUnder([dir]);
  await rm(dir, { recursive: true, force: true });
}

/**
 * An iptables-restore script (--noflush) removing every KUBE-* chain in an iptables-save dump and the rules of other
 * chains that jump to one: what the kubelet (KUBE-FIREWALL, KUBE-IPTABLES-HINT, KUBE-KUBELET-CANARY) and kube-proxy
 * (KUBE-MARK-MASQ, KUBE-PROXY-CANARY, which `kube-proxy --cleanup` keeps; all of its chains after a crash) leave.
 * Undefined when there is none.
 */
export function kubeChainsRestoreScript(save: string): string | undefined {
  const out: string[] = [];
  let table: string | undefined;
  let chains: string[] = [];
  let jumps: string[] = [];
  const flush = (): void => {
    if (table !== undefined && (chains.length || jumps.length)) {
      out.push(`*${table}`, ...jumps.map((rule) => `-D ${rule.slice(3)}`), ...chains.map((c) => `-F ${c}`), ...chains.map((c) => `-X ${c}`), 'COMMIT');
    }
  };
  for (const line of save.split('\n')) {
    if (line.startsWith('*')) {
      flush();
      table = line.slice(1).trim();
      chains = [];
      jumps = [];
    } else if (line.startsWith(':KUBE-')) {
      chains.push(line.slice(1).split(' ')[0] as string);
    } else if (line.startsWith('-A ') && !line.startsWith('-A KUBE-') && / -[jg] KUBE-/.test(line)) {
      jumps.push(line);
    }
  }
  flush();
  return out.length ? `${out.join('\n')}\n` : undefined;
}

/** The pids of kubelet, kube-proxy and kube-router processes running on the host (by executable name), e.g. another node's. */
export async function kubeNodeProcesses(): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const exe = await readlink(`/proc/${entry}/exe`).catch(() => '');
    if (/^(kubelet|kube-proxy|kube-router)(-v[\d.]+)?$/.test(basename(exe))) pids.push(Number(entry));
  }
  return pids;
}

/**
 * Removes the kubelet's, kube-proxy's and kube-router's iptables chains (IPv4 and IPv6) and kube-proxy's nftables
 * tables, unless one of them still runs on the host (it would be another node's, whose rules these are too).
 * Returns how many chains and tables went, or undefined when skipped.
 */
export async function removeKubeRules(): Promise<number | undefined> {
  if ((await kubeNodeProcesses()).length > 0) return undefined;
  let removed = 0;
  for (const [save, restore] of [
    ['iptables-save', 'iptables-restore'],
    ['ip6tables-save', 'ip6tables-restore'],
  ] as const) {
    const saved = await tryRun(save, []);
    if (saved.code !== 0) continue;
    const script = kubeChainsRestoreScript(saved.stdout);
    if (!script) continue;
    const restored = await tryRun(restore, ['--noflush'], { input: script });
    if (restored.code !== 0) throw new TestbedError(`removing kubelet and kube-proxy iptables chains failed: ${restored.stderr.trim()}\nscript:\n${script}`);
    removed += script.split('\n').filter((l) => l.startsWith('-X ')).length;
  }
  for (const family of ['ip', 'ip6']) {
    if ((await tryRun('nft', ['list', 'table', family, 'kube-proxy'])).code === 0) {
      await tryRun('nft', ['delete', 'table', family, 'kube-proxy']);
      removed++;
    }
  }
  return removed;
}

/**
 * Destroys the ipsets kube-router's firewall fills (KUBE-SRC-*, KUBE-DST-*) once no node process runs on the host; call after removeKubeRules, since a set an iptables rule names cannot go.
 * Returns how many went, or undefined when skipped (no ipset, or another node's processes run).
 */
export async function removeKubeRouterSets(): Promise<number | undefined> {
  if ((await kubeNodeProcesses()).length > 0) return undefined;
  const listed = await tryRun('ipset', ['list', '-n']).catch(() => undefined);
  if (listed?.code !== 0) return undefined;
  const names = listed.stdout.split('\n').filter((n) => /^KUBE-(SRC|DST)-/u.test(n));
  let removed = 0;
  for (const name of names) if ((await tryRun('ipset', ['destroy', name])).code === 0) removed++;
  return removed;
}
