import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { TestProject } from 'vitest/node';
import { selectKubeVersion, startTestbed } from '../../src/dev/index.js';
import './helpers/testbed.js';

const say = (message: string): void => {
  process.stderr.write(`testbed: ${message}\n`);
};

/**
 * Starts ONE bed (2 clusters + NATS) for every integration file and hands its connection details over with
 * provide/inject. Also builds dist/, since some tests run the CLI as a child process, as a user would. Its
 * kube-apiservers run the Kubernetes minor CTRLMESH_KUBE_VERSION names (default v1.33; `npm run test:kube-next`).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Checked before anything starts: an unknown version fails the run at once, naming the variable.
  const kubeVersion = selectKubeVersion(undefined, process.env);
  const started = Date.now();
  // The package's own build, which leaves the CLI executable: `npx ctrlmesh` runs it as a program after the tests.
  await promisify(execFile)('npm', ['run', '--silent', 'build']);
  say(`dist/ built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  const dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-testbed-'));
  // Interrupted, vitest exits without teardown: the kernel then kills the servers (see src/dev/server-process.ts),
  // and this removes their files.
  const removeDir = (): void => rmSync(dir, { recursive: true, force: true });
  process.once('exit', removeDir);
  const bed = await startTestbed({ clusters: 2, dir, kubeVersion, onProgress: say });
  say(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s; server logs in ${dir}`);
  project.provide('testbed', bed.info);
  return async () => {
    await bed.down();
    process.off('exit', removeDir);
    await rm(dir, { recursive: true, force: true });
  };
}
