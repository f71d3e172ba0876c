import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../../src/errors.js';
import { findTool, resolveTool, TOOL_SPECS } from '../../../src/dev/index.js';

async function executable(path: string): Promise<string> {
  await writeFile(path, '#!/bin/sh\n');
  await chmod(path, 0o755);
  return path;
}

describe('tool resolution', () => {
  let dir: string;
  let env: NodeJS.ProcessEnv;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-tools-'));
    // An empty cache and no Go on PATH: nothing here may build.
    env = { XDG_CACHE_HOME: join(dir, 'cache'), PATH: join(dir, 'empty-path'), HOME: dir };
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('prefers the explicit variable, then KUBEBUILDER_ASSETS, then the cache', async () => {
    const assets = join(dir, 'assets');
    await mkdir(assets);
    await executable(join(assets, 'etcd'));
    const cached = join(dir, 'cache', 'ctrlmesh', 'bin');
    await mkdir(cached, { recursive: true });
    await executable(join(cached, `etcd-${TOOL_SPECS.etcd.version}`));
    const explicit = await executable(join(dir, 'my-etcd'));

    expect(await findTool('etcd', { ...env, CTRLMESH_ETCD: explicit, KUBEBUILDER_ASSETS: assets })).toMatchObject({ path: explicit, source: 'CTRLMESH_ETCD' });
    expect(await findTool('etcd', { ...env, KUBEBUILDER_ASSETS: assets })).toMatchObject({ path: join(assets, 'etcd'), source: 'KUBEBUILDER_ASSETS' });
    expect(await findTool('etcd', env)).toMatchObject({ path: join(cached, 'etcd-v3.5.21'), source: 'cache' });
  });

  it('does not look for nats-server in KUBEBUILDER_ASSETS (envtest ships none)', async () => {
    const assets = join(dir, 'assets');
    await mkdir(assets);
    await executable(join(assets, 'nats-server'));
    expect(await findTool('nats-server', { ...env, KUBEBUILDER_ASSETS: assets })).toBeUndefined();
  });

  it('names the variable when its path holds no executable', async () => {
    await expect(findTool('kube-apiserver', { ...env, CTRLMESH_KUBE_APISERVER: join(dir, 'missing') })).rejects.toMatchObject({
      code: ErrorCodes.TOOL,
      message: expect.stringContaining('CTRLMESH_KUBE_APISERVER='),
    });
  });

  it('says to install Go when a build is needed and go is not on PATH', async () => {
    await expect(resolveTool('nats-server', { env })).rejects.toMatchObject({
      code: ErrorCodes.TOOL,
      message: expect.stringMatching(/needs the Go toolchain \(go 1\.24 or newer\)/),
    });
  });
});
