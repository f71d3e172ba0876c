import { setTimeout as sleep } from 'node:timers/promises';
import { livePidRecords, stillRunning, type PidRecord } from './pid-file.js';

const GRACE_MS = 10_000;
const POLL_MS = 200;

/**
 * Stops the servers a bed in `dir` left running (its parent killed hard, before the kernel's parent-death signal
 * could help, or a `dev up` still running): SIGTERM, then SIGKILL after a grace period. Returns what it stopped.
 */
export async function stopLeftovers(dir: string): Promise<PidRecord[]> {
  const live = await livePidRecords(dir);
  for (const record of live) process.kill(record.pid, 'SIGTERM');
  const deadline = Date.now() + GRACE_MS;
  const remaining = async (): Promise<PidRecord[]> =>
    (await Promise.all(live.map(async (r) => ((await stillRunning(r)) ? [r] : [])))).flat();
  let left = await remaining();
  while (left.length > 0 && Date.now() < deadline) {
    await sleep(POLL_MS);
    left = await remaining();
  }
  for (const record of left) process.kill(record.pid, 'SIGKILL');
  return live;
}
