import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { livePidRecords } from '../../src/dev/index.js';
import { eventually } from './helpers/eventually.js';

/** Running = listed in /proc and not a zombie (an orphan stays a zombie until init reaps it). */
async function running(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  return stat !== undefined && stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

// dist/ is built by the global setup: the CLI runs here exactly as a user starts it.
const CLI = join('dist', 'src', 'cli', 'main.js');

/** Runs `ctrlmesh dev up` with one cluster, stops it with `stop`, and asserts that none of its servers is left. */
async function expectNoServerLeftAfter(stop: (devUp: { pid: number; dir: string }) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-signal-'));
  try {
    const child = spawn(process.execPath, [CLI, 'dev', 'up', '--clusters', '1', '--dir', dir, '--log-level', 'warn'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = once(child, 'exit');
    for await (const line of createInterface({ input: child.stdout })) if (line.includes('test bed ready')) break;

    const servers = (await livePidRecords(dir)).filter((r) => !r.owner);
    expect(servers.map((s) => s.name).sort()).toEqual(['etcd', 'kube-apiserver cluster-a', 'nats-server']);

    await stop({ pid: child.pid ?? -1, dir });
    await exited;
    // A process with many threads takes a moment to exit after SIGKILL: wait for it, as pgrep would see it.
    const left = async (): Promise<string[]> => (await Promise.all(servers.map(async (s) => ((await running(s.pid)) ? [s.name] : [])))).flat();
    await eventually(async () => (await left()).length === 0, { timeoutMs: 30_000 });
    expect(await left()).toEqual([]);
    expect(await livePidRecords(dir)).toEqual([]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('ctrlmesh dev up leaves no server behind', () => {
  // SIGKILL cannot be handled: there the kernel's parent-death signal (setpriv --pdeathsig) stops the servers.
  it.each(['SIGINT', 'SIGTERM', 'SIGKILL'] as const)('when it receives %s', async (signal) => {
    await expectNoServerLeftAfter(async ({ pid }) => {
      process.kill(pid, signal);
    });
  });

  it('when `ctrlmesh dev down` runs from another shell', async () => {
    await expectNoServerLeftAfter(async ({ dir }) => {
      const { stdout } = await promisify(execFile)(process.execPath, [CLI, 'dev', 'down', '--dir', dir]);
      expect(stdout).toMatch(/^stopped ctrlmesh dev up \(pid \d+\)$/m);
    });
  });
});
