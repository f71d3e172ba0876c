import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { withFileLock } from '../../../src/dev/file-lock.js';

describe('withFileLock', () => {
  let dir: string;
  let path: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-lock-'));
    path = join(dir, 'tool.lock');
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('runs holders one at a time', async () => {
    const events: string[] = [];
    const holder = (name: string) =>
      withFileLock({ path }, async () => {
        events.push(`${name} in`);
        await sleep(50);
        events.push(`${name} out`);
      });
    await Promise.all([holder('a'), holder('b')]);
    expect([
      ['a in', 'a out', 'b in', 'b out'],
      ['b in', 'b out', 'a in', 'a out'],
    ]).toContainEqual(events);
  });

  it('takes over a lock whose holder died', async () => {
    const dead = spawnSync(process.execPath, ['-e', '']).pid;
    await writeFile(path, String(dead));
    expect(await withFileLock({ path }, async () => 'took it')).toBe('took it');
  });
});
