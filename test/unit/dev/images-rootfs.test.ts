import { lstat, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { assembleRootfs, parseLddOutput, sharedLibraries } from '../../../src/dev/index.js';

// A small dynamically linked program present on any Linux with coreutils.
const DYNAMIC = '/bin/true';

describe('root filesystem', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-rootfs-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('copies a dynamic executable with every library ldd reports, the loader included, at the same paths', async () => {
    const libraries = await sharedLibraries(DYNAMIC);
    expect(libraries.some((l) => /\/libc\.so\.6$/.test(l))).toBe(true);
    expect(libraries.some((l) => /\/ld-linux[^/]*\.so\.\d$/.test(l))).toBe(true);

    const rootfs = join(dir, 'rootfs');
    const result = await assembleRootfs({ dir: rootfs, executables: [{ source: DYNAMIC, target: '/bin/app' }] });
    expect(result.libraries).toEqual([...libraries].sort());
    expect((await stat(join(rootfs, 'bin/app'))).mode & 0o7777).toBe(0o755);
    for (const lib of libraries) {
      // Real files, not links into the host: /lib64/ld-linux-x86-64.so.2 is usually a symbolic link.
      const info = await lstat(join(rootfs, lib));
      expect(info.isFile(), lib).toBe(true);
      expect(info.size).toBe((await stat(lib)).size);
    }
  });

  it('writes root and the unprivileged user 1000, and a sticky world-writable /tmp', async () => {
    const rootfs = join(dir, 'rootfs');
    await assembleRootfs({ dir: rootfs });
    expect(await readFile(join(rootfs, 'etc/passwd'), 'utf8')).toBe(
      'root:x:0:0:root:/root:/sbin/nologin\nctrlmesh:x:1000:1000:ctrlmesh:/tmp:/sbin/nologin\n',
    );
    expect(await readFile(join(rootfs, 'etc/group'), 'utf8')).toBe('root:x:0:\nctrlmesh:x:1000:\n');
    // Files before DNS, and localhost without DNS: outside a kubelet (ctr run) nothing mounts /etc/hosts.
    expect(await readFile(join(rootfs, 'etc/nsswitch.conf'), 'utf8')).toMatch(/^hosts: files dns$/m);
    expect(await readFile(join(rootfs, 'etc/hosts'), 'utf8')).toMatch(/^127\.0\.0\.1\tlocalhost$/m);
    expect((await stat(join(rootfs, 'tmp'))).mode & 0o7777).toBe(0o1777);
    expect((await stat(join(rootfs, 'etc'))).mode & 0o7777).toBe(0o755);
  });

  it('copies trees as they are', async () => {
    const rootfs = join(dir, 'rootfs');
    await assembleRootfs({ dir: rootfs, trees: [{ source: join(import.meta.dirname, '..', 'dev'), target: '/app/tests' }] });
    expect((await stat(join(rootfs, 'app/tests/images-rootfs.test.ts'))).isFile()).toBe(true);
  });

  it('reads ldd output: libraries, the loader, the vDSO (no file), static binaries and missing libraries', () => {
    const dynamic = [
      '\tlinux-vdso.so.1 (0x00007ffd5a3d2000)',
      '\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6 (0x00007f40c6600000)',
      '\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f40c641e000)',
      '\t/lib64/ld-linux-x86-64.so.2 (0x00007f40c694a000)',
    ].join('\n');
    expect(parseLddOutput(dynamic)).toEqual([
      '/lib/x86_64-linux-gnu/libstdc++.so.6',
      '/lib/x86_64-linux-gnu/libc.so.6',
      '/lib64/ld-linux-x86-64.so.2',
    ]);
    expect(parseLddOutput('\tnot a dynamic executable\n')).toEqual([]);
    expect(parseLddOutput('\tstatically linked\n')).toEqual([]);
    expect(() => parseLddOutput('\tlibfoo.so.1 => not found\n', '/bin/x')).toThrow(/\/bin\/x needs libraries .*libfoo\.so\.1/);
  });
});
