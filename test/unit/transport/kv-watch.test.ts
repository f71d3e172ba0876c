import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { watchKv, type NatsLink } from '../../../src/transport/index.js';

// What a unit test can judge of watchKv without a NATS server: how it reacts to its link's events, to an `open`
// that keeps failing (the bucket not created yet, NATS away), to restart() and stop(). What it does with a real
// watch (resume from the last revision, a bucket deleted and created again, a stalled watch) is judged against a
// real nats-server in test/integration/kv-watch.test.ts.

type WatchOptions = Parameters<typeof watchKv>[0];
type ConnectionEvent = Parameters<Parameters<NatsLink['onEvent']>[0]>[0];

/** A link driven by the test: only its events matter to watchKv. */
class ScriptedLink {
  readonly listeners = new Set<(event: ConnectionEvent) => void>();
  onEvent(listener: (event: ConnectionEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  emit(event: ConnectionEvent): void {
    for (const listener of [...this.listeners]) listener(event);
  }
  asLink(): NatsLink {
    return this as unknown as NatsLink;
  }
}

const RETRY_MS = 1_000;

describe('watchKv (without a server)', () => {
  let warnings: string[];
  let logger: WatchOptions['logger'];

  beforeEach(() => {
    vi.useFakeTimers();
    warnings = [];
    logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push((JSON.parse(line) as { msg: string }).msg) });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function start(link = new ScriptedLink()) {
    let opens = 0;
    const watch = watchKv({
      link: link.asLink(),
      open: async () => {
        opens += 1;
        throw new Error('stream not found');
      },
      key: 'k.>',
      logger,
      onEntry: () => {
        throw new Error('no entry can arrive');
      },
      retryMs: RETRY_MS,
    });
    return { link, watch, opens: () => opens };
  }

  it('keeps trying to open the bucket, once every retryMs, logging each failure', async () => {
    const { watch, opens } = start();
    await vi.advanceTimersByTimeAsync(0);
    expect(opens()).toBe(1);
    await vi.advanceTimersByTimeAsync(RETRY_MS - 1);
    expect(opens()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(opens()).toBe(2);
    await vi.advanceTimersByTimeAsync(3 * RETRY_MS);
    expect(opens()).toBe(5);
    expect(warnings).toEqual(Array(5).fill('KV watch failed; retrying'));
    watch.stop();
  });

  it('tries again at once when the connection comes back after a disconnection, not on other events', async () => {
    const { link, watch, opens } = start();
    await vi.advanceTimersByTimeAsync(0);
    expect(opens()).toBe(1);
    link.emit({ state: 'disconnected', reconnected: false });
    link.emit({ state: 'connected', reconnected: false });
    await vi.advanceTimersByTimeAsync(0);
    expect(opens()).toBe(1);
    link.emit({ state: 'connected', reconnected: true });
    await vi.advanceTimersByTimeAsync(0);
    expect(opens()).toBe(2);
    watch.stop();
  });

  it('tries again at once on restart()', async () => {
    const { watch, opens } = start();
    await vi.advanceTimersByTimeAsync(0);
    watch.restart();
    await vi.advanceTimersByTimeAsync(0);
    expect(opens()).toBe(2);
    watch.restart();
    await vi.advanceTimersByTimeAsync(0);
    expect(opens()).toBe(3);
    watch.stop();
  });

  it('stops for good: no more attempts, no warning, its link listener removed', async () => {
    const { link, watch, opens } = start();
    await vi.advanceTimersByTimeAsync(0);
    expect(link.listeners.size).toBe(1);
    watch.stop();
    await vi.advanceTimersByTimeAsync(10 * RETRY_MS);
    expect(opens()).toBe(1);
    expect(link.listeners.size).toBe(0);
    expect(warnings).toHaveLength(1);
    // A restart after stop() wakes nothing.
    watch.restart();
    await vi.advanceTimersByTimeAsync(RETRY_MS);
    expect(opens()).toBe(1);
  });

  it('stopped while an open is still in flight, it never retries', async () => {
    const link = new ScriptedLink();
    let opens = 0;
    let fail: ((err: Error) => void) | undefined;
    const watch = watchKv({
      link: link.asLink(),
      open: () => {
        opens += 1;
        return new Promise((_resolve, reject) => (fail = reject));
      },
      key: 'k',
      logger,
      onEntry: () => undefined,
      retryMs: RETRY_MS,
    });
    await vi.advanceTimersByTimeAsync(0);
    watch.stop();
    fail?.(new Error('connection closed'));
    await vi.advanceTimersByTimeAsync(10 * RETRY_MS);
    expect(opens).toBe(1);
    expect(warnings).toEqual([]);
  });
});
