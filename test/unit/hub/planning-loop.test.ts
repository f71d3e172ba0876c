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

  it('plans at once on the first change after a quiet period, and folds the next ones into one pass after the debounce', async () => {
    const { loop, passes } = setup();
    loop.schedule();
    await vi.advanceTimersByTimeAsync(0);
    expect(passes()).toBe(1);
    loop.schedule();
    await vi.advanceTimersByTimeAsync(50);
    loop.schedule();
    await vi.advanceTimersByTimeAsync(HUB_DEFAULTS.debounceMs - 51);
    expect(passes()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(passes()).toBe(2);
    await vi.advanceTimersByTimeAsync(HUB_DEFAULTS.debounceMs);
    loop.schedule();
    await vi.advanceTimersByTimeAsync(0);
    expect(passes()).toBe(3);
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
