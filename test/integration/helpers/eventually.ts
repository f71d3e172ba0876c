import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Polls `check` until it returns true or `timeoutMs` passes, then returns the last answer. A generous wait for
 * something that happens asynchronously (a process exiting), not a speed assertion.
 */
export async function eventually(check: () => Promise<boolean>, options: { timeoutMs: number; intervalMs?: number }): Promise<boolean> {
  const deadline = Date.now() + options.timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await sleep(options.intervalMs ?? 200);
  }
}
