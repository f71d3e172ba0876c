import { setTimeout as sleep } from 'node:timers/promises';
import { livePidRecords, stillRunning, type PidRecord } from './pid-file.js';

const GRACE_MS = 20_000;
const POLL_MS = 200;

/**
 * Stops what a bed in `dir` still runs: first its owner (a `ctrlmesh dev up` in another shell), which stops its
 * servers in order, then any server left (e.g. started by a process that recorded no owner). SIGTERM, then
 * SIGKILL after a grace period. Returns what it stopped.
 */
export async function stopLeftovers(dir: string): Promise<PidRecord[]> {
  const live = await livePidRecords(dir);
  const owners = live.filter((r) => r.owner);
  await terminate(owners);
  const servers = (await livePidRecords(dir)).filter((r) => !r.owner);
  await terminate(servers);
  return [...owners, ...servers];
}

async function terminate(live: PidRecord[]): Promise<void> {
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
}
