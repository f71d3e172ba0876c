import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BUCKET_CHECK_MS, createPlanningLoop } from '../../../src/hub/planning-loop.js';
import { HUB_DEFAULTS } from '../../../src/hub/index.js';
import { createHubMetrics, createRegistry } from '../../../src/metrics/index.js';
import type { BucketName, KeptBuckets } from '../../../src/transport/index.js';
import { FakeKv } from './fake-kv.js';
import { fleetWithClusterA } from './fleet-fixture.js';

const logger = pino({ level: 'silent' });

/**
 * A loop whose passes are counted (each pass asks for the health once); by default its buckets are empty, so a pass
 * fails after planning.
 */
function setup(leader = true, buckets = {} as KeptBuckets) {
  const { fleet, signer } = fleetWithClusterA(logger);
  const health = vi.fn(() => new Map());
  const state = { leader };
  const loop = createPlanningLoop({
    ...HUB_DEFAULTS,
    fleet,
    buckets,
    signer,
    metrics: createHubMetrics(createRegistry('hub')),
    logger,
    now: () => Date.now(),
    monotonic: () => performance.now(),
    isLeader: () => state.leader,
    loaded: () => true,
    health,
  });
  return { loop, passes: () => health.mock.calls.length, state };
}

describe('planning loop', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('plans each change at once, and paces a steady stream to one pass per debounce', async () => {
    const { loop, passes } = setup();
    loop.schedule();
    await vi.advanceTimersByTimeAsync(0);
    expect(passes()).toBe(1);
    // A change soon after a pass is not held back.
    await vi.advanceTimersByTimeAsync(10);
    loop.schedule();
    await vi.advanceTimersByTimeAsync(0);
    expect(passes()).toBe(2);
    // Changes every 10 ms for 2 s: a few at once, then one pass per debounce.
    for (let t = 0; t < 2_000; t += 10) {
      loop.schedule();
      await vi.advanceTimersByTimeAsync(10);
    }
    expect(passes()).toBeLessThanOrEqual(2 + 5 + 2_000 / HUB_DEFAULTS.debounceMs + 1);
    expect(passes()).toBeGreaterThanOrEqual(2 + 2_000 / HUB_DEFAULTS.debounceMs);
    await loop.stop();
  });

  it('checks the buckets on the first pass, then only once BUCKET_CHECK_MS has passed, and on the pass after one that could not', async () => {
    const restore = vi.fn(async (): Promise<BucketName[]> => []);
    const kv = (): KeptBuckets['routes'] => new FakeKv().asKv();
    const { loop, passes } = setup(true, { routes: kv(), state: kv(), clusters: kv(), hub: kv(), restore } as unknown as KeptBuckets);
    loop.schedule();
    await vi.advanceTimersByTimeAsync(0);
    expect([passes(), restore.mock.calls.length]).toEqual([1, 1]);
    // A change soon after does not wait for another check.
    await vi.advanceTimersByTimeAsync(10);
    loop.schedule();
    await vi.advanceTimersByTimeAsync(0);
    expect([passes(), restore.mock.calls.length]).toEqual([2, 1]);
    // Quiet: a pass comes for the check.
    await vi.advanceTimersByTimeAsync(BUCKET_CHECK_MS + 100);
    expect([passes(), restore.mock.calls.length]).toEqual([3, 2]);
    // A check that NATS could not answer is made again on the next change.
    restore.mockRejectedValueOnce(new Error('no responders'));
    await vi.advanceTimersByTimeAsync(BUCKET_CHECK_MS + 100);
    expect(restore.mock.calls.length).toBe(3);
    loop.schedule();
    await vi.advanceTimersByTimeAsync(0);
    expect(restore.mock.calls.length).toBe(4);
    await loop.stop();
  });

  it('plans only as leader, and at once on becoming leader', async () => {
    const { loop, passes, state } = setup(false);
    loop.schedule();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(passes()).toBe(0);
    state.leader = true;
    loop.becameLeader();
    await vi.advanceTimersByTimeAsync(0);
    expect(passes()).toBe(1);
    await loop.stop();
    loop.schedule();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(passes()).toBe(1);
  });
});
