import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildProjectImage, imageCacheDir, TOOL_SPECS } from '../../../src/dev/index.js';

/** pause.c of the pinned Kubernetes module, if Go has it in its module cache (no download in a unit test). */
function pauseSourceAvailable(): boolean {
  try {
    const modCache = execFileSync('go', ['env', 'GOMODCACHE'], { encoding: 'utf8' }).trim();
    execFileSync('gcc', ['--version'], { stdio: 'ignore' });
    return existsSync(join(modCache, `k8s.io/kubernetes@${TOOL_SPECS['kube-apiserver'].version}`, 'build/pause/linux/pause.c'));
  } catch {
    return false;
  }
}

describe.skipIf(!pauseSourceAvailable())('project images (the pause image: small, built from source in a second)', () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-images-'));
    env = { ...process.env, XDG_CACHE_HOME: join(dir, 'cache') };
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('builds into the image cache, reuses it while the key holds, and rebuilds to the same digest', async () => {
    const progress: string[] = [];
    const first = await buildProjectImage('pause', { env, onProgress: (m) => progress.push(m) });
    expect(first).toMatchObject({
      name: 'pause',
      ref: 'localhost/ctrlmesh/pause:3.10',
      archive: join(imageCacheDir(env), 'pause-3.10.oci.tar'),
      source: 'built',
    });
    expect(first.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(progress.join('\n')).toMatch(/compiled .*pause\.c with gcc -Os .*-static/);

    const second = await buildProjectImage('pause', { env });
    expect(second).toEqual({ ...first, source: 'cache' });

    await rm(imageCacheDir(env), { recursive: true });
    const rebuilt = await buildProjectImage('pause', { env });
    expect(rebuilt).toEqual(first);
  }, 60_000);
});
