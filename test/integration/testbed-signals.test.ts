import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
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

describe('ctrlmesh dev up leaves no server behind', () => {
  // SIGKILL cannot be handled: there the kernel's parent-death signal (setpriv --pdeathsig) stops the servers.
  it.each(['SIGINT', 'SIGTERM', 'SIGKILL'] as const)('when it receives %s', async (signal) => {
    const dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-signal-'));
    try {
      const child = spawn(process.execPath, [CLI, 'dev', 'up', '--clusters', '1', '--dir', dir, '--log-level', 'warn'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const exited = once(child, 'exit');
      for await (const line of createInterface({ input: child.stdout })) if (line.includes('test bed ready')) break;

      const servers = await livePidRecords(dir);
      expect(servers.map((s) => s.name).sort()).toEqual(['etcd', 'kube-apiserver cluster-a', 'nats-server']);

      child.kill(signal);
      await exited;
      expect(await eventually(async () => (await livePidRecords(dir)).length === 0, { timeoutMs: 30_000 })).toBe(true);
      const stillRunning = (await Promise.all(servers.map(async (s) => ((await running(s.pid)) ? [s.name] : [])))).flat();
      expect(stillRunning).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
