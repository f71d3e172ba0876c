import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createPlanningLoop } from '../../../src/hub/planning-loop.js';
import { HUB_DEFAULTS } from '../../../src/hub/index.js';
import { createHubMetrics, createRegistry } from '../../../src/metrics/index.js';
import type { KeptBuckets } from '../../../src/transport/index.js';
import { fleetWithClusterA } from './fleet-fixture.js';

const logger = pino({ level: 'silent' });

/** A loop whose passes are counted (each pass asks for the health once); its buckets are empty, so a pass fails after planning. */
function setup(leader = true) {
  const { fleet, signer } = fleetWithClusterA(logger);
  const health = vi.fn(() => new Map());
  const state = { leader };
  const loop = createPlanningLoop({
    ...HUB_DEFAULTS,
    fleet,
    buckets: {} as KeptBuckets,
    signer,
    metrics: createHubMetrics(createRegistry('hub')),
    logger,
    now: () => Date.now(),
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
