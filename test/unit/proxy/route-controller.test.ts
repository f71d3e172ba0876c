import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createProxyMetrics } from '../../../src/metrics/index.js';
import { ClusterLinks } from '../../../src/proxy/upstream/cluster-links.js';
import { RouteController } from '../../../src/proxy/routes/route-controller.js';
import type { RouteSource, RouteSourceHandlers } from '../../../src/proxy/routes/route-source.js';
import { TableStore, type StoredTable } from '../../../src/proxy/routes/table-store.js';
import type { RouteTable } from '../../../src/transport/index.js';
import { clusterFixture, routeTableFixture } from './route-table-fixture.js';

const logger = pino({ level: 'silent' });

function table(version: number, buckets: number[], leaseSeconds = 10): RouteTable {
  return routeTableFixture({ version, leaseSeconds, clusters: [clusterFixture('a', buckets)] });
}

/** A source driven by the test: what a NATS KV source reports, without NATS. */
class ScriptedSource implements RouteSource {
  readonly description = 'scripted source';
  readonly leased: boolean;
  handlers: RouteSourceHandlers | undefined;
  readonly acks: number[] = [];
  readonly failStart: boolean;
  constructor(options: { leased: boolean; failStart?: boolean }) {
    this.leased = options.leased;
    this.failStart = options.failStart ?? false;
  }
  async start(handlers: RouteSourceHandlers): Promise<void> {
    if (this.failStart) throw new Error('source down');
    this.handlers = handlers;
  }
  async acknowledge(t: RouteTable): Promise<void> {
    this.acks.push(t.version);
  }
  async stop(): Promise<void> {}
}

describe('RouteController', () => {
  let dir: string;
  let now = 1_000_000;
  const controllers: RouteController[] = [];
  const links: ClusterLinks[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-controller-'));
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
  });
  afterEach(async () => {
    vi.useRealTimers();
    mono = undefined;
    boot = 'boot-1';
    for (const c of controllers.splice(0)) await c.stop();
    for (const l of links.splice(0)) await l.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** The lease clock: the wall clock (`now`) unless a test steps one apart from the other. */
  let mono: (() => number) | undefined;
  let boot: string | undefined = 'boot-1';
  function make(source: RouteSource, leaseMarginMs = 0, store = new TableStore(join(dir, 'store.json'))): RouteController {
    const metrics = createProxyMetrics(new Registry());
    const link = new ClusterLinks({
      credentials: new Map(),
      upstream: { headersTimeoutMs: 1000 },
      breaker: { errorThresholdPercentage: 50, volumeThreshold: 5, resetTimeoutMs: 1000, rollingCountTimeoutMs: 10_000 },
      metrics,
      logger,
    });
    links.push(link);
    const controller = new RouteController({ source, store, links: link, metrics, logger, now: () => now, leaseClock: { monotonic: () => (mono ? mono() : now), boot }, tickMs: 100, leaseMarginMs });
    controllers.push(controller);
    return controller;
  }

  it('applies only newer versions, ends the watches a change invalidates, then acknowledges', async () => {
    const source = new ScriptedSource({ leased: true });
    const controller = make(source);
    await controller.start();
    source.handlers!.onRenewal(now);
    source.handlers!.onTable(table(2, [1, 2]));
    const expired: string[] = [];
    const carries = controller.current!.clusters.get('a')!.view.carries('', 'configmaps');
    controller.registerWatch({ cluster: 'a', group: '', resource: 'configmaps', carries, expire: () => expired.push('configmaps') });
    source.handlers!.onTable(table(1, []));
    expect(controller.current!.table.version).toBe(2);
    expect(expired).toEqual([]);
    const breaker = controller.current!.clusters.get('a')!.breaker;
    source.handlers!.onTable(table(3, [1]));
    expect(expired).toEqual(['configmaps']);
    // Only buckets moved: the cluster keeps its pool and its breaker (and the breaker's state).
    expect(controller.current!.clusters.get('a')!.breaker).toBe(breaker);
    expect(controller.watches.size).toBe(0);
    await vi.waitFor(() => expect(source.acks).toEqual([2, 3]));
  });

  it('retries a table it could not store until the store works again, logging the cause once, then acknowledges it', async () => {
    let failures = 3;
    class FlakyStore extends TableStore {
      override save(stored: StoredTable): Promise<void> {
        if (failures > 0) {
          failures--;
          return Promise.reject(new Error('EROFS: read-only file system'));
        }
        return super.save(stored);
      }
    }
    const source = new ScriptedSource({ leased: true });
    const errors = vi.spyOn(logger, 'error');
    const controller = make(source, 0, new FlakyStore(join(dir, 'store.json')));
    await controller.start();
    source.handlers!.onRenewal(now);
    source.handlers!.onTable(table(2, [1]));
    expect(source.acks).toEqual([]);
    await vi.waitFor(() => expect(source.acks).toEqual([2]), { timeout: 5_000 });
    expect(errors.mock.calls.filter(([, message]) => String(message).includes('not stored or acknowledged'))).toHaveLength(1);
    errors.mockRestore();
  });

  it('names the cluster rules in force in each acknowledgement, and acknowledges again when they change', async () => {
    const acked: { version: number; rules: readonly unknown[] | undefined }[] = [];
    const source = new (class extends ScriptedSource {
      override async acknowledge(t: RouteTable, rules?: readonly unknown[]): Promise<void> {
        acked.push({ version: t.version, rules });
      }
    })({ leased: true });
    let rules = [{ kind: 'CircuitBreaker' as const, namespace: 'op', name: 'b', generation: 1 }];
    const metrics = createProxyMetrics(new Registry());
    const link = new ClusterLinks({ credentials: new Map(), upstream: { headersTimeoutMs: 1000 }, breaker: { errorThresholdPercentage: 50, volumeThreshold: 5, resetTimeoutMs: 1000, rollingCountTimeoutMs: 10_000 }, metrics, logger });
    links.push(link);
    const controller = new RouteController({ source, store: new TableStore(join(dir, 'store.json')), links: link, metrics, logger, now: () => now, appliedRules: () => rules });
    controllers.push(controller);
    await controller.start();
    // Nothing acknowledged yet: nothing to send again.
    controller.reacknowledge();
    expect(acked).toEqual([]);
    source.handlers!.onTable(table(1, [1]));
    await vi.waitFor(() => expect(acked).toEqual([{ version: 1, rules }]));
    rules = [];
    controller.reacknowledge();
    expect(acked).toEqual([
      { version: 1, rules: [{ kind: 'CircuitBreaker', namespace: 'op', name: 'b', generation: 1 }] },
      { version: 1, rules: [] },
    ]);
  });

  it('acknowledges a table only once the writes admitted under the previous one are answered', async () => {
    const source = new ScriptedSource({ leased: true });
    const controller = make(source);
    await controller.start();
    source.handlers!.onRenewal(now);
    source.handlers!.onTable(table(1, [1, 2]));
    await vi.waitFor(() => expect(source.acks).toEqual([1]));
    let answer: () => void = () => undefined;
    const inFlight = controller.trackWrite(new Promise<void>((resolve) => (answer = resolve)));
    // Bucket 2 is revoked while a write admitted under version 1 is still on its way to the API server.
    source.handlers!.onTable(table(2, [1]));
    void controller.trackWrite(new Promise<void>(() => undefined));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(source.acks).toEqual([1]);
    answer();
    await inFlight;
    // A write admitted under version 2 (still pending) does not hold version 2's acknowledgement back.
    await vi.waitFor(() => expect(source.acks).toEqual([1, 2]));
    expect(controller.writes.size).toBe(1);
  });

  it('fences itself at its last extension + lease - margin, whatever the connection says, and serves again on an extension', async () => {
    const source = new ScriptedSource({ leased: true });
    const controller = make(source, 1_000);
    await controller.start();
    source.handlers!.onTable(table(1, [4, 5], 10));
    // No extension yet: a table alone is not contact.
    expect(controller.readiness().reasons[0]).toMatch(/^fenced: no lease extension yet/);
    const askedAt = now;
    source.handlers!.onRenewal(askedAt);
    expect(controller.readiness().ready).toBe(true);
    const view = () => controller.current!.clusters.get('a')!.view;
    const expired: string[] = [];
    controller.registerWatch({ cluster: 'a', group: '', resource: 'pods', carries: view().carries('', 'pods'), expire: () => expired.push('pods') });
    // The connection still looks up (a silent partition): it changes nothing.
    source.handlers!.onContact(true);
    now = askedAt + 8_900;
    vi.advanceTimersByTime(200);
    expect(controller.readiness().ready).toBe(true);
    now = askedAt + 9_000;
    vi.advanceTimersByTime(200);
    const readiness = controller.readiness();
    expect(readiness.ready).toBe(false);
    expect(readiness.reasons[0]).toMatch(/^fenced: no lease extension for 9s from scripted source \(lease 10s\)/);
    expect(view().ownsNothing).toBe(true);
    expect(view().selectorFor('', 'pods')).toBe('h,!h');
    expect(expired).toEqual(['pods']);
    // An extension asked for before the last one changes nothing; a new one serves again.
    source.handlers!.onRenewal(askedAt - 1);
    expect(controller.readiness().ready).toBe(false);
    source.handlers!.onRenewal(now);
    expect(controller.readiness().ready).toBe(true);
    expect([...view().owned]).toEqual([4, 5]);
  });

  it('never fences on a source without a lease (a static file)', async () => {
    const source = new ScriptedSource({ leased: false });
    const controller = make(source);
    await controller.start();
    source.handlers!.onTable(table(1, [4], 1));
    source.handlers!.onContact(false);
    now += 60_000;
    vi.advanceTimersByTime(200);
    expect(controller.readiness().ready).toBe(true);
  });

  it('acknowledges the live copy of the stored table it started with, so the hub extends its lease', async () => {
    await new TableStore(join(dir, 'store.json')).save({ table: table(7, [9], 10), contactAt: now - 5_000 });
    const source = new ScriptedSource({ leased: true });
    const controller = make(source);
    await controller.start();
    expect(controller.current!.table.version).toBe(7);
    const installed = controller.current;
    source.handlers!.onTable(table(7, [9], 10));
    await vi.waitFor(() => expect(source.acks).toEqual([7]));
    // Not installed again: the watches opened under the stored table stay open.
    expect(controller.current).toBe(installed);
    source.handlers!.onTable(table(7, [9], 10));
    await new Promise((r) => setTimeout(r, 10));
    expect(source.acks).toEqual([7]);
  });

  it('serves the stored table when the source cannot start, and counts the lease from the stored extension', async () => {
    await new TableStore(join(dir, 'store.json')).save({ table: table(7, [9], 10), contactAt: now - 5_000, lease: { monotonicAt: now - 5_000, boot: 'boot-1' } });
    const controller = make(new ScriptedSource({ leased: true, failStart: true }));
    await controller.start();
    expect(controller.current!.table.version).toBe(7);
    expect(controller.readiness().ready).toBe(true);
    now += 6_000;
    vi.advanceTimersByTime(200);
    expect(controller.readiness().ready).toBe(false);
  });

  describe('on the monotonic clock, whatever the wall clock does', () => {
    /** The monotonic clock of these cases, apart from `now` (the wall clock, which they step). */
    let m = 0;
    beforeEach(() => {
      m = 500_000;
      mono = () => m;
    });

    for (const stepMs of [-60_000, 60_000]) {
      it(`fences exactly when the monotonic lease ends with the wall clock stepped ${stepMs < 0 ? 'back' : 'forward'} 60 s`, async () => {
        const source = new ScriptedSource({ leased: true });
        const controller = make(source, 2_000);
        await controller.start();
        source.handlers!.onTable(table(1, [4], 10));
        source.handlers!.onRenewal(m);
        vi.advanceTimersByTime(200);
        expect(controller.readiness().ready).toBe(true);
        const state = controller.current!;
        now += stepMs;
        m += 1;
        vi.advanceTimersByTime(200);
        expect(controller.readiness().ready).toBe(true);
        expect(controller.stillServes(state)).toBe(true);
        // Lease 10 s, margin 2 s: serving until 8 s after askedAt on the monotonic clock, not a millisecond longer.
        m = 500_000 + 7_999;
        vi.advanceTimersByTime(200);
        expect(controller.readiness().ready).toBe(true);
        expect(controller.stillServes(controller.current!)).toBe(true);
        m = 500_000 + 8_000;
        expect(controller.stillServes(controller.current!)).toBe(false);
        vi.advanceTimersByTime(200);
        expect(controller.readiness().ready).toBe(false);
        expect(controller.readiness().reasons[0]).toMatch(/no lease extension for 8s/);
        // An extension asked for after the step counts although its wall time is below the last one's.
        source.handlers!.onRenewal(m);
        vi.advanceTimersByTime(200);
        expect(controller.readiness().ready).toBe(true);
      });
    }

    it('a stored extension: counted on from the same boot, spent while the process was down; another boot starts fenced', async () => {
      const store = new TableStore(join(dir, 'store.json'));
      // Extended 5 s ago on this boot's monotonic clock; the wall clock has since stepped back a minute.
      await store.save({ table: table(7, [9], 10), contactAt: now, lease: { monotonicAt: m - 5_000, boot: 'boot-1' } });
      now -= 60_000;
      const same = make(new ScriptedSource({ leased: true, failStart: true }));
      await same.start();
      expect(same.readiness().ready).toBe(true);
      m += 4_999;
      vi.advanceTimersByTime(200);
      expect(same.readiness().ready).toBe(true);
      m += 1;
      vi.advanceTimersByTime(200);
      expect(same.readiness().ready).toBe(false);
      await same.stop();

      await store.save({ table: table(7, [9], 10), contactAt: now, lease: { monotonicAt: m - 1_000, boot: 'boot-1' } });
      boot = 'boot-2';
      const rebooted = make(new ScriptedSource({ leased: true, failStart: true }));
      await rebooted.start();
      expect(rebooted.current!.table.version).toBe(7);
      expect(rebooted.readiness().ready).toBe(false);

      // A store without a monotonic reading (an earlier version's, or a wall contactAt alone) is not trusted either.
      await store.save({ table: table(7, [9], 10), contactAt: now + 3_600_000 });
      boot = 'boot-1';
      const walled = make(new ScriptedSource({ leased: true }));
      await walled.start();
      expect(walled.readiness().ready).toBe(false);
    });
  });
});
