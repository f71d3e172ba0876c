import { open, readFile, stat, unlink } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { isAlive } from './process-alive.js';

const POLL_MS = 1000;
// A lock file younger than this may not have its pid written yet.
const PID_GRACE_MS = 5000;

export interface FileLockOptions {
  path: string;
  /** Called about every 15 s while another live process holds the lock. */
  onWait?: (holderPid: number | undefined, waitedMs: number) => void;
}

/**
 * Runs `fn` while holding an exclusive lock file (created with O_EXCL, holding our pid), so two processes
 * (e.g. two vitest workers) never build the same tool at once. A lock whose holder died is taken over.
 */
export async function withFileLock<T>(options: FileLockOptions, fn: () => Promise<T>): Promise<T> {
  const started = Date.now();
  let lastReport = started;
  for (;;) {
    try {
      const handle = await open(options.path, 'wx');
      try {
        await handle.writeFile(String(process.pid));
      } finally {
        await handle.close();
      }
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = await lockHolder(options.path);
    if (holder === 'stale') {
      await unlink(options.path).catch(() => undefined);
      continue;
    }
    if (Date.now() - lastReport >= 15_000) {
      lastReport = Date.now();
      options.onWait?.(holder, lastReport - started);
    }
    await sleep(POLL_MS);
  }
  try {
    return await fn();
  } finally {
    await unlink(options.path).catch(() => undefined);
  }
}

async function lockHolder(path: string): Promise<number | undefined | 'stale'> {
  const [content, info] = await Promise.all([readFile(path, 'utf8').catch(() => ''), stat(path).catch(() => undefined)]);
  if (!info) return undefined; // released meanwhile: the next attempt takes it
  const pid = Number(content);
  if (!Number.isInteger(pid) || pid <= 0) return Date.now() - info.mtimeMs > PID_GRACE_MS ? 'stale' : undefined;
  return isAlive(pid) ? pid : 'stale';
}
