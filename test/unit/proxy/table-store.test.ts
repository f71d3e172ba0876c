import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TableStore, parseStoredTable } from '../../../src/proxy/routes/table-store.js';
import { routeTableFixture } from './route-table-fixture.js';

/** A pino logger whose lines are kept. */
function recordingLogger(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, lines };
}

describe('TableStore', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-store-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('gives back what it saved, and nothing when there is no file yet', async () => {
    const store = new TableStore(join(dir, 'table.json'));
    expect(await store.load()).toBeUndefined();
    const stored = { table: routeTableFixture({ version: 7 }), contactAt: 1_234 };
    await store.save(stored);
    expect(await store.load()).toEqual(stored);
  });

  it('ignores a truncated, empty or malformed file with one warning naming it, instead of throwing', async () => {
    const path = join(dir, 'table.json');
    const whole = JSON.stringify({ table: routeTableFixture({ version: 7 }), contactAt: 1 });
    for (const text of [whole.slice(0, whole.length / 2), '', '\n', 'null', '{"contactAt": 5}', JSON.stringify({ table: { version: 'x' }, contactAt: 1 })]) {
      await writeFile(path, text);
      const { logger, lines } = recordingLogger();
      expect(await new TableStore(path, logger).load()).toBeUndefined();
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ level: 40, path, msg: expect.stringContaining('corrupt') });
    }
  });

  it('reports a file it cannot read at all as a file error (a configuration mistake)', async () => {
    const path = join(dir, 'a-directory');
    await mkdir(path);
    await expect(new TableStore(path).load()).rejects.toMatchObject({ code: 'CM_FILE' });
  });
});

describe('parseStoredTable', () => {
  it('says why a text is not a stored table', () => {
    expect(parseStoredTable('', 'f')).toEqual({ corrupt: 'the file is empty' });
    expect(parseStoredTable('{"tab', 'f')).toEqual({ corrupt: expect.stringContaining('not JSON') });
    expect(parseStoredTable('[]', 'f')).toEqual({ corrupt: 'no "table" field' });
    expect(parseStoredTable(JSON.stringify({ table: {} }), 'f')).toEqual({ corrupt: expect.stringContaining('not a valid route table') });
    const table = routeTableFixture({ version: 3 });
    expect(parseStoredTable(JSON.stringify({ table }), 'f')).toEqual({ table, contactAt: 0 });
  });

  it('keeps a monotonic extension only when it is well formed (otherwise the proxy starts fenced)', () => {
    const table = routeTableFixture({ version: 3 });
    const lease = { monotonicAt: 12_345.5, boot: 'b0' };
    expect(parseStoredTable(JSON.stringify({ table, contactAt: 9, lease }), 'f')).toEqual({ table, contactAt: 9, lease });
    for (const bad of [null, 5, { monotonicAt: '1', boot: 'b0' }, { monotonicAt: 1, boot: '' }, { monotonicAt: 1 }]) {
      expect(parseStoredTable(JSON.stringify({ table, contactAt: 9, lease: bad }), 'f')).toEqual({ table, contactAt: 9 });
    }
  });
});
