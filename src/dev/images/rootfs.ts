import { chmod, copyFile, cp, lstat, mkdir, stat, writeFile } from 'node:fs/promises';
import { isAbsolute, join, posix } from 'node:path';
import { ToolError } from '../../errors.js';
import { runCommand } from './run.js';

/** One thing to put into the image: `source` on this machine, `target` its absolute path inside the image. */
export interface RootfsEntry {
  source: string;
  target: string;
}

export interface RootfsOptions {
  /** The directory to fill; created if missing. */
  dir: string;
  /** Programs, copied with mode 0755 together with the shared libraries (and loader) `ldd` reports for them. */
  executables?: readonly RootfsEntry[];
  /** Files or directory trees copied as they are (modes kept, symbolic links kept as links). */
  trees?: readonly RootfsEntry[];
  signal?: AbortSignal;
}

export interface RootfsResult {
  dir: string;
  /** Image paths of the libraries copied for the executables, sorted. */
  libraries: string[];
}

/** The unprivileged user the charts run as (runAsUser/fsGroup 1000). */
export const IMAGE_USER = { name: 'ctrlmesh', uid: 1000, gid: 1000 } as const;

// Home is /tmp: the layer is owned by root, so a home directory of its own would not be writable for the user.
const PASSWD = `root:x:0:0:root:/root:/sbin/nologin\n${IMAGE_USER.name}:x:${IMAGE_USER.uid}:${IMAGE_USER.gid}:${IMAGE_USER.name}:/tmp:/sbin/nologin\n`;
const GROUP = `root:x:0:\n${IMAGE_USER.name}:x:${IMAGE_USER.gid}:\n`;
// Without this file glibc asks DNS before /etc/hosts, so "localhost" would depend on the cluster's DNS.
const NSSWITCH = 'passwd: files\ngroup: files\nhosts: files dns\n';
// The kubelet mounts its own /etc/hosts over this one; outside Kubernetes (ctr run) "localhost" still resolves.
const HOSTS = '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n';

/**
 * Assembles a minimal root filesystem: the executables and their libraries at the paths the dynamic loader
 * expects (the host's absolute paths), /etc/passwd and /etc/group with root and the `ctrlmesh` user, name-service
 * files (nsswitch.conf, hosts) and /tmp.
 * No shell, no package manager: only what the programs load.
 */
export async function assembleRootfs(options: RootfsOptions): Promise<RootfsResult> {
  const root = options.dir;
  await mkdir(root, { recursive: true });
  const libraries = new Set<string>();
  for (const exe of options.executables ?? []) {
    await place(root, exe.target, async (dest) => {
      await copyFile(exe.source, dest);
      await chmod(dest, 0o755);
    });
    for (const lib of await sharedLibraries(exe.source, options.signal)) libraries.add(lib);
  }
  for (const lib of libraries) {
    // copyFile follows symbolic links: /lib64/ld-linux-x86-64.so.2 is usually a link to the real loader, and the
    // image gets the loader itself at the path written into every dynamic executable.
    const mode = (await stat(lib)).mode & 0o7777;
    await place(root, lib, async (dest) => {
      await copyFile(lib, dest);
      await chmod(dest, mode);
    });
  }
  for (const tree of options.trees ?? []) {
    await place(root, tree.target, (dest) => cp(tree.source, dest, { recursive: true, verbatimSymlinks: true, force: true }));
  }
  await place(root, '/etc/passwd', (dest) => writeText(dest, PASSWD));
  await place(root, '/etc/group', (dest) => writeText(dest, GROUP));
  await place(root, '/etc/nsswitch.conf', (dest) => writeText(dest, NSSWITCH));
  await place(root, '/etc/hosts', (dest) => writeText(dest, HOSTS));
  await ensureDir(root, '/tmp');
  // World-writable with the sticky bit, as on any Linux system: programs running as 1000 write temporary files.
  await chmod(join(root, 'tmp'), 0o1777);
  return { dir: root, libraries: [...libraries].sort() };
}

/**
 * The shared libraries an executable loads, as absolute host paths (the dynamic loader included), from `ldd`.
 * A static executable has none.
 */
export async function sharedLibraries(executable: string, signal?: AbortSignal): Promise<string[]> {
  // ldd exits 1 for a static executable ("not a dynamic executable"); the output says which case it is.
  const result = await runCommand('ldd', [executable], { label: `listing the libraries of ${executable}`, okCodes: [1], signal });
  const output = `${result.stdout}\n${result.stderr}`;
  if (result.code !== 0 && !isStatic(output)) {
    throw new ToolError(`listing the libraries of ${executable}: ldd failed:\n${output.trim()}`);
  }
  return parseLddOutput(output, executable);
}

function isStatic(lddOutput: string): boolean {
  return /not a dynamic executable|statically linked/.test(lddOutput);
}

/** Parses `ldd` output into absolute library paths; a library ldd cannot find is an error (the image would not start). */
export function parseLddOutput(output: string, executable = 'the executable'): string[] {
  if (isStatic(output)) return [];
  const paths: string[] = [];
  const missing: string[] = [];
  for (const raw of output.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)",
    // "linux-vdso.so.1 (0x...)" (provided by the kernel: no file), "libfoo.so.1 => not found".
    const arrow = /^(\S+) => (.+?)(?: \(0x[0-9a-f]+\))?$/.exec(line);
    if (arrow) {
      const target = arrow[2] ?? '';
      if (target === 'not found') missing.push(arrow[1] ?? line);
      else if (isAbsolute(target)) paths.push(target);
      continue;
    }
    const direct = /^(\/\S+) \(0x[0-9a-f]+\)$/.exec(line);
    if (direct?.[1]) paths.push(direct[1]);
  }
  if (missing.length > 0) throw new ToolError(`${executable} needs libraries this machine does not have: ${missing.join(', ')}`);
  return [...new Set(paths)];
}

/** Creates the parent directories of an image path (each 0755, whatever the umask) and lets `write` fill the path. */
async function place(root: string, imagePath: string, write: (dest: string) => Promise<void>): Promise<void> {
  if (!posix.isAbsolute(imagePath)) throw new ToolError(`image path ${imagePath} must be absolute`);
  const dest = join(root, imagePath);
  await ensureDir(root, posix.dirname(imagePath));
  await write(dest);
}

async function ensureDir(root: string, imagePath: string): Promise<void> {
  let current = root;
  for (const part of imagePath.split('/').filter(Boolean)) {
    current = join(current, part);
    const info = await lstat(current).catch(() => undefined);
    if (info?.isDirectory()) continue;
    if (info) throw new ToolError(`cannot create directory ${current}: a file is in the way`);
    await mkdir(current);
    await chmod(current, 0o755);
  }
}

async function writeText(dest: string, text: string): Promise<void> {
  await writeFile(dest, text);
  await chmod(dest, 0o644);
}
