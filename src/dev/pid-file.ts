import { mkdir, readFile, readlink, readdir, realpath, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { isAlive } from './process-alive.js';

/** What a server's pid file records: enough for `ctrlmesh dev down` to kill it safely after its parent died. */
export interface PidRecord {
  pid: number;
  /** The server's executable, compared with /proc/<pid>/exe so a reused pid is never killed. */
  binary: string;
  name: string;
  /** The process that started the bed (`ctrlmesh dev up`): stopped first, so it stops its servers in order. */
  owner?: boolean;
}

const PID_FILE = 'pid.json';

export async function writePidFile(dir: string, record: PidRecord): Promise<void> {
  await writeFile(join(dir, PID_FILE), `${JSON.stringify(record)}\n`);
}

export async function removePidFile(dir: string): Promise<void> {
  await rm(join(dir, PID_FILE), { force: true });
}

/** Records this process as the owner of the bed in `bedDir`; the returned function removes the record. */
export async function recordOwner(bedDir: string, name: string): Promise<() => Promise<void>> {
  const dir = join(bedDir, 'owner');
  await mkdir(dir, { recursive: true });
  await writePidFile(dir, { pid: process.pid, binary: await realpath(process.execPath), name, owner: true });
  return () => removePidFile(dir);
}

async function readPidFile(dir: string): Promise<PidRecord | undefined> {
  const text = await readFile(join(dir, PID_FILE), 'utf8').catch(() => undefined);
  return text === undefined ? undefined : (JSON.parse(text) as PidRecord);
}

async function subdirectories(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isDirectory()).map((e) => join(dir, e.name));
}

/**
 * The processes recorded in `<bedDir>/<server>/pid.json`, or one level deeper for a group of servers (a NATS
 * cluster's `<bedDir>/nats/server-1/pid.json`), that still run the recorded binary.
 */
export async function livePidRecords(bedDir: string): Promise<PidRecord[]> {
  const live: PidRecord[] = [];
  for (const dir of await subdirectories(bedDir)) {
    const own = await readPidFile(dir);
    const records = own ? [own] : (await Promise.all((await subdirectories(dir)).map(readPidFile))).filter((r) => r !== undefined);
    for (const record of records) if (await stillRunning(record)) live.push(record);
  }
  return live;
}

/** Whether the recorded process still runs its binary (a zombie or a reused pid does not). */
export async function stillRunning(record: PidRecord): Promise<boolean> {
  if (!isAlive(record.pid)) return false;
  const exe = await readlink(`/proc/${record.pid}/exe`).catch(() => undefined);
  return exe === record.binary;
}
