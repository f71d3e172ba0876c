import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DebouncedRunner } from '../../../src/runtime/index.js';

describe('DebouncedRunner', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('runs once for a burst of schedules, after the quiet delay', async () => {
    const task = vi.fn(async () => undefined);
    const runner = new DebouncedRunner({ delayMs: 50, task });
    for (let i = 0; i < 5; i++) {
      runner.schedule();
      await vi.advanceTimersByTimeAsync(20);
    }
    expect(task).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(50);
    expect(task).toHaveBeenCalledTimes(1);
  });

  it('never overlaps runs, and a schedule during a run earns exactly one more run', async () => {
    let active = 0;
    let most = 0;
    const finish: (() => void)[] = [];
    const task = vi.fn(async () => {
      active += 1;
      most = Math.max(most, active);
      await new Promise<void>((resolve) => finish.push(resolve));
      active -= 1;
    });
    const runner = new DebouncedRunner({ delayMs: 10, task });
    runner.schedule();
    await vi.advanceTimersByTimeAsync(10);
    runner.schedule();
    await vi.advanceTimersByTimeAsync(10);
    runner.schedule();
    await vi.advanceTimersByTimeAsync(10);
    expect(task).toHaveBeenCalledTimes(1);
    finish.shift()?.();
    await vi.advanceTimersByTimeAsync(10);
    expect(task).toHaveBeenCalledTimes(2);
    finish.shift()?.();
    await vi.advanceTimersByTimeAsync(100);
    expect(task).toHaveBeenCalledTimes(2);
    expect(most).toBe(1);
  });

  it('keeps going after a failed run, and stop() cancels what is scheduled and waits for the run in progress', async () => {
    const task = vi.fn(async () => {
      throw new Error('boom');
    });
    const runner = new DebouncedRunner({ delayMs: 10, task });
    runner.schedule();
    await vi.advanceTimersByTimeAsync(10);
    runner.schedule();
    await vi.advanceTimersByTimeAsync(10);
    expect(task).toHaveBeenCalledTimes(2);
    runner.schedule();
    await runner.stop();
    runner.schedule();
    await vi.advanceTimersByTimeAsync(100);
    expect(task).toHaveBeenCalledTimes(2);
  });
});
