import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ACK_STORE_DELAY_MS, createLeaderDuties } from '../../../src/hub/leader-duties.js';
import { HUB_DEFAULTS } from '../../../src/hub/options.js';
import { createHubMetrics, createRegistry } from '../../../src/metrics/index.js';
import { Keys, MESSAGE_SCHEMA_VERSION, Messages, decodeMessage, type Ack, type KeptBuckets, type NatsLink } from '../../../src/transport/index.js';
import { FakeKv } from './fake-kv.js';
import { fleetWithClusterA } from './fleet-fixture.js';

const logger = pino({ level: 'silent' });

const ack = (shard: string, version: number): Ack => ({
  schema: MESSAGE_SCHEMA_VERSION,
  operator: 'ns/op',
  shard,
  version,
  ackedAt: '2026-01-01T00:00:00Z',
});

/** Leader duties over a fake state bucket; only the acknowledgements' storage is exercised (nothing is served). */
function setup() {
  const { fleet, signer } = fleetWithClusterA(logger);
  const state = new FakeKv();
  const leadership = { leader: true };
  const duties = createLeaderDuties({
    tokens: [],
    agentIdentityTtlMs: HUB_DEFAULTS.agentIdentityTtlMs,
    loaded: () => true,
    link: {} as NatsLink,
    buckets: { clusters: new FakeKv().asKv(), state: state.asKv() } as Pick<KeptBuckets, 'clusters' | 'state'>,
    fleet,
    signer,
    metrics: createHubMetrics(createRegistry('hub')),
    logger,
    now: () => Date.now(),
    isLeader: () => leadership.leader,
    changed: () => undefined,
  });
  const stored = (shard: string): number | undefined => {
    const value = state.values.get(Keys.ack('ns/op', shard))?.value;
    if (!value) return undefined;
    const decoded = decodeMessage(Messages.ack, value);
    return decoded.ok ? decoded.value.version : undefined;
  };
  return { duties, state, leadership, stored };
}

describe('leader duties: storing acknowledgements', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('stores the latest of each shard once the burst has passed, not while it comes', async () => {
    const { duties, state, stored } = setup();
    duties.storeAck(ack('s1', 1));
    duties.storeAck(ack('s2', 1));
    duties.storeAck(ack('s1', 2));
    expect(state.log).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(ACK_STORE_DELAY_MS);
    expect(state.log).toHaveLength(2);
    expect([stored('s1'), stored('s2')]).toEqual([2, 1]);
    // The next acknowledgement waits for a timer of its own.
    duties.storeAck(ack('s2', 3));
    await vi.advanceTimersByTimeAsync(ACK_STORE_DELAY_MS - 1);
    expect(stored('s2')).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(stored('s2')).toBe(3);
  });

  it('stores what waits when the hub stops while leader, and drops it when leadership was lost', async () => {
    const stopping = setup();
    stopping.duties.storeAck(ack('s1', 1));
    stopping.duties.end();
    await vi.advanceTimersByTimeAsync(0);
    expect(stopping.stored('s1')).toBe(1);

    const deposed = setup();
    deposed.duties.storeAck(ack('s1', 1));
    deposed.leadership.leader = false;
    deposed.duties.end();
    await vi.advanceTimersByTimeAsync(ACK_STORE_DELAY_MS);
    expect(deposed.state.log).toHaveLength(0);
  });
});
