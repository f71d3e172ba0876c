import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';

/** The pids of every process the demo recorded under `dir` (each writes DIR/.../pid.json while it runs). */
async function recordedPids(dir: string): Promise<number[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  const files = entries.filter((e) => e.isFile() && e.name === 'pid.json').map((e) => join(e.parentPath, e.name));
  return Promise.all(files.map(async (f) => (JSON.parse(await readFile(f, 'utf8')) as { pid: number }).pid));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('ctrlmesh demo', () => {
  let dir = '';
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('brings up the mesh, shows ownership, rates and breakers live, and Ctrl-C tears every process down', async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-demo-'));
    const child = spawn(process.execPath, ['dist/src/cli/main.js', 'demo', '--dir', dir, '--refresh', '500ms', '--log-level', 'warn'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));

    // The last full view: three shards, each owning units in both clusters, and each proxy's rates and breakers.
    const lastView = (): string => out.slice(out.lastIndexOf('ControllerMesh demo:'));
    const deadline = Date.now() + 150_000;
    while (!/(cluster-a\/demo-\d-normal +\d+\.\d +closed +\d+\.\d +closed[^\n]*\n[^]*){3}/.test(lastView()) && Date.now() < deadline) {
      if (child.exitCode !== null) throw new Error(`demo exited early with ${child.exitCode}:\n${err}`);
      await sleep(500);
    }
    const view = lastView();
    expect(view, err).toMatch(/cluster-a +Ready/);
    expect(view).toMatch(/cluster-b +Ready/);
    expect(view.match(/operator-demo\/demo-root +cluster-a\/demo-\d-normal +\d+ +\S+ +cluster-a:\S+ cluster-b:\S+/g)).toHaveLength(3);
    expect(view).toMatch(/SHARD +REQ\/S cluster-a +BREAKER cluster-a +REQ\/S cluster-b +BREAKER cluster-b +RATE-LIMITED +FAULTS +TABLE/);

    const pids = await recordedPids(dir);
    // etcd, 2 API servers, NATS, the hub, 2 agents, and a proxy and an operator per shard.
    expect(pids.length).toBe(4 + 1 + 2 + 3 * 2);
    child.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(pids.filter(alive)).toEqual([]);
  }, 200_000);
});
