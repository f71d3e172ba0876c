import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DebouncedRunner } from '../../../src/runtime/index.js';

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

describe('DebouncedRunner', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('runs at once (next turn) on the first change after a quiet period, once for a synchronous burst', async () => {
    const task = vi.fn(async () => undefined);
    const runner = new DebouncedRunner({ delayMs: 200, task });
    for (let i = 0; i < 5; i++) runner.schedule();
    expect(task).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(0);
    expect(task).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(task).toHaveBeenCalledTimes(1);
  });

  it('folds the changes within the delay after a run into one run, the delay after it ended', async () => {
    const task = vi.fn(async () => undefined);
    const runner = new DebouncedRunner({ delayMs: 50, task });
    runner.schedule();
    await vi.advanceTimersByTimeAsync(0);
    expect(task).toHaveBeenCalledTimes(1);
    for (let i = 0; i < 4; i++) {
      await vi.advanceTimersByTimeAsync(10);
      runner.schedule();
    }
    await vi.advanceTimersByTimeAsync(9);
    expect(task).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(task).toHaveBeenCalledTimes(2);
    // The trailing run opens a window of its own; nothing came in it, so the next change runs at once again.
    await vi.advanceTimersByTimeAsync(50);
    runner.schedule();
    await vi.advanceTimersByTimeAsync(0);
    expect(task).toHaveBeenCalledTimes(3);
  });

  it('never overlaps runs, and changes during a run earn exactly one more run, the delay after it ended', async () => {
    const { task, finishOne, most } = heldTask();
    const runner = new DebouncedRunner({ delayMs: 10, task });
    runner.schedule();
    await vi.advanceTimersByTimeAsync(0);
    runner.schedule();
    await vi.advanceTimersByTimeAsync(30);
    runner.schedule();
    await vi.advanceTimersByTimeAsync(30);
    expect(task).toHaveBeenCalledTimes(1);
    finishOne();
    await vi.advanceTimersByTimeAsync(9);
    expect(task).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(task).toHaveBeenCalledTimes(2);
    finishOne();
    await vi.advanceTimersByTimeAsync(100);
    expect(task).toHaveBeenCalledTimes(2);
    expect(most()).toBe(1);
  });

  it('keeps up with a steady stream of changes: one run per window, none starved', async () => {
    const task = vi.fn(async () => undefined);
    const runner = new DebouncedRunner({ delayMs: 50, task });
    for (let t = 0; t < 1_000; t += 20) {
      runner.schedule();
      await vi.advanceTimersByTimeAsync(20);
    }
    // The first at once, then one at the end of each 50 ms window.
    expect(task.mock.calls.length).toBeGreaterThanOrEqual(19);
    expect(task.mock.calls.length).toBeLessThanOrEqual(21);
    await runner.stop();
  });

  it('with no delay, runs again on the next turn after a run that saw changes', async () => {
    const { task, finishOne } = heldTask();
    const runner = new DebouncedRunner({ delayMs: 0, task });
    runner.schedule();
    await vi.advanceTimersByTimeAsync(0);
    runner.schedule();
    runner.schedule();
    finishOne();
    await vi.advanceTimersByTimeAsync(0);
    expect(task).toHaveBeenCalledTimes(2);
    finishOne();
    await vi.advanceTimersByTimeAsync(10);
    expect(task).toHaveBeenCalledTimes(2);
  });

  it('keeps going after a failed run, and stop() cancels what is scheduled and waits for the run in progress', async () => {
    const task = vi.fn(async () => {
      throw new Error('boom');
    });
    const runner = new DebouncedRunner({ delayMs: 10, task });
    runner.schedule();
    await vi.advanceTimersByTimeAsync(0);
    runner.schedule();
    await vi.advanceTimersByTimeAsync(10);
    expect(task).toHaveBeenCalledTimes(2);
    runner.schedule();
    await runner.stop();
    runner.schedule();
    await vi.advanceTimersByTimeAsync(100);
    expect(task).toHaveBeenCalledTimes(2);
  });

  it('serves a run due at a time like a change, but without a window of its own: the next change runs at once', async () => {
    const task = vi.fn(async () => undefined);
    const runner = new DebouncedRunner({ delayMs: 200, task });
    runner.runDue();
    await vi.advanceTimersByTimeAsync(0);
    expect(task).toHaveBeenCalledTimes(1);
    await vi.advanceTimersByTimeAsync(10);
    runner.schedule();
    await vi.advanceTimersByTimeAsync(0);
    expect(task).toHaveBeenCalledTimes(2);
    // That change opened a window: a due run in it waits for its end, and opens none itself.
    runner.runDue();
    await vi.advanceTimersByTimeAsync(199);
    expect(task).toHaveBeenCalledTimes(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(task).toHaveBeenCalledTimes(3);
    runner.schedule();
    await vi.advanceTimersByTimeAsync(0);
    expect(task).toHaveBeenCalledTimes(4);
  });

  it('stop() during a run waits for it and runs nothing after', async () => {
    const { task, finishOne } = heldTask();
    const runner = new DebouncedRunner({ delayMs: 10, task });
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
