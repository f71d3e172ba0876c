import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CoalescingRunner } from '../../../src/runtime/index.js';

/** A task that stays running until the test lets it finish. */
function heldTask() {
  let active = 0;
  let most = 0;
  const finish: (() => void)[] = [];
  const task = vi.fn(async () => {
    active += 1;
    most = Math.max(most, active);
    await new Promise<void>((resolve) => finish.push(resolve));
    active -= 1;
  });
  return { task, finishOne: () => finish.shift()?.(), most: () => most };
}

describe('CoalescingRunner', () => {
  // Fake timers fake Date.now too: the bucket's clock moves with them.
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('runs at once (next turn) on a change, once for a synchronous burst', async () => {
    const task = vi.fn(async () => undefined);
    const runner = new CoalescingRunner({ intervalMs: 200, task });
    for (let i = 0; i < 5; i++) runner.schedule();
    expect(task).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(0);
    expect(task).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(task).toHaveBeenCalledTimes(1);
  });

  it('never overlaps runs; the changes during a run earn exactly one more, as soon as it ends', async () => {
    const { task, finishOne, most } = heldTask();
    const runner = new CoalescingRunner({ intervalMs: 200, task });
    runner.schedule();
    await vi.advanceTimersByTimeAsync(0);
    for (let i = 0; i < 3; i++) runner.schedule();
    await vi.advanceTimersByTimeAsync(30);
    expect(task).toHaveBeenCalledTimes(1);
    finishOne();
    await vi.advanceTimersByTimeAsync(0);
    expect(task).toHaveBeenCalledTimes(2);
    finishOne();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(task).toHaveBeenCalledTimes(2);
    expect(most()).toBe(1);
  });

  it('an isolated change never waits, however recent the last runs were, while the bucket holds one', async () => {
    const task = vi.fn(async () => undefined);
    const runner = new CoalescingRunner({ intervalMs: 200, burst: 3, task });
    for (let i = 1; i <= 3; i++) {
      runner.schedule();
      await vi.advanceTimersByTimeAsync(1);
      expect(task).toHaveBeenCalledTimes(i);
    }
    // The bucket is empty: the next change waits until it holds a run again (200 ms per run, a few ms have passed).
    runner.schedule();
    await vi.advanceTimersByTimeAsync(190);
    expect(task).toHaveBeenCalledTimes(3);
    await vi.advanceTimersByTimeAsync(15);
    expect(task).toHaveBeenCalledTimes(4);
    // A quiet moment refills it.
    await vi.advanceTimersByTimeAsync(600);
    for (let i = 5; i <= 7; i++) {
      runner.schedule();
      await vi.advanceTimersByTimeAsync(0);
      expect(task).toHaveBeenCalledTimes(i);
    }
  });

  it('paces a steady stream of changes to one run per interval, none starved', async () => {
    const task = vi.fn(async () => undefined);
    const runner = new CoalescingRunner({ intervalMs: 50, burst: 5, task });
    for (let t = 0; t < 1_000; t += 20) {
      runner.schedule();
      await vi.advanceTimersByTimeAsync(20);
    }
    // The burst at once, then one per 50 ms.
    expect(task.mock.calls.length).toBeGreaterThanOrEqual(23);
    expect(task.mock.calls.length).toBeLessThanOrEqual(26);
    await runner.stop();
  });

  it('with no interval, runs again on the next turn after each run that saw changes, without limit', async () => {
    const { task, finishOne } = heldTask();
    const runner = new CoalescingRunner({ intervalMs: 0, burst: 1, task });
    runner.schedule();
    await vi.advanceTimersByTimeAsync(0);
    for (let i = 2; i <= 10; i++) {
      runner.schedule();
      finishOne();
      await vi.advanceTimersByTimeAsync(0);
      expect(task).toHaveBeenCalledTimes(i);
    }
    finishOne();
    await vi.advanceTimersByTimeAsync(100);
    expect(task).toHaveBeenCalledTimes(10);
  });

  it('keeps going after a failed run, and stop() cancels what is scheduled and waits for the run in progress', async () => {
    const task = vi.fn(async () => {
      throw new Error('boom');
    });
    const runner = new CoalescingRunner({ intervalMs: 10, task });
    runner.schedule();
    await vi.advanceTimersByTimeAsync(0);
    runner.schedule();
    await vi.advanceTimersByTimeAsync(0);
    expect(task).toHaveBeenCalledTimes(2);
    runner.schedule();
    await runner.stop();
    runner.schedule();
    await vi.advanceTimersByTimeAsync(100);
    expect(task).toHaveBeenCalledTimes(2);
  });

  it('serves a run due at a time without taking from the bucket, even when it is empty', async () => {
    const task = vi.fn(async () => undefined);
    const runner = new CoalescingRunner({ intervalMs: 200, burst: 1, task });
    runner.schedule();
    await vi.advanceTimersByTimeAsync(0);
    expect(task).toHaveBeenCalledTimes(1);
    runner.runDue();
    await vi.advanceTimersByTimeAsync(0);
    expect(task).toHaveBeenCalledTimes(2);
    // A change waits for the bucket; a due run asked meanwhile goes with it.
    runner.schedule();
    runner.runDue();
    await vi.advanceTimersByTimeAsync(199);
    expect(task).toHaveBeenCalledTimes(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(task).toHaveBeenCalledTimes(3);
  });

  it('stop() during a run waits for it and runs nothing after', async () => {
    const { task, finishOne } = heldTask();
    const runner = new CoalescingRunner({ intervalMs: 10, task });
    runner.schedule();
    await vi.advanceTimersByTimeAsync(0);
    runner.schedule();
    let stopped = false;
    const stopping = runner.stop().then(() => (stopped = true));
    await vi.advanceTimersByTimeAsync(0);
    expect(stopped).toBe(false);
    finishOne();
    await stopping;
    await vi.advanceTimersByTimeAsync(100);
    expect(task).toHaveBeenCalledTimes(1);
  });
});
