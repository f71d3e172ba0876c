import { spawnSync } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { withFileLock } from '../../../src/dev/file-lock.js';

describe('withFileLock', () => {
  it('runs holders one at a time', async () => {
    const path = join(await mkdtemp(join(tmpdir(), 'ctrlmesh-lock-')), 'tool.lock');
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
    const path = join(await mkdtemp(join(tmpdir(), 'ctrlmesh-lock-')), 'tool.lock');
    const dead = spawnSync(process.execPath, ['-e', '']).pid;
    await writeFile(path, String(dead));
    expect(await withFileLock({ path }, async () => 'took it')).toBe('took it');
  });
});
