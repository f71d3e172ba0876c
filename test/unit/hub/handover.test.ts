import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EMPTY_HANDOVER_STATE, handoverStep, SERVING_RECHECK_MS, type HandoverState } from '../../../src/hub/handover.js';
import { unitKey, type Ownership } from '../../../src/sharding/index.js';
import { nextTableVersion } from '../../../src/hub/table-version.js';
import { RevocationClock } from '../../../src/hub/revocation-clock.js';
import type { HandoverRecord } from '../../../src/transport/index.js';

const LEASE = 10_000;
const u = (b: number): string => unitKey('a', b);

function step(state: HandoverState, desired: Ownership, extra: { versions?: Record<string, number>; acks?: Record<string, number>; now: number }) {
  const acks = extra.acks ?? {};
  return handoverStep({ state, desired, versions: extra.versions ?? {}, acks, serving: new Set(Object.keys(acks)), now: extra.now, monotonicNow: extra.now, revokedSeenAt: (r) => r.revokedAt, leaseMs: LEASE, marginMs: 0, leaderSince: 0, historyLimit: 10 });
}

describe('handoverStep', () => {
  it('grants unowned units at once', () => {
    const out = step(EMPTY_HANDOVER_STATE, { s0: [u(0), u(1)], s1: [u(2)] }, { now: 0 });
    expect(out.state.effective).toEqual({ s0: [u(0), u(1)], s1: [u(2)] });
    expect(out.changedShards).toEqual(['s0', 's1']);
    expect(out.state.pending).toEqual([]);
  });

  it('revokes first and grants after the old shard acknowledges', () => {
    const start = step(EMPTY_HANDOVER_STATE, { s0: [u(0), u(1)], s1: [] }, { now: 0 }).state;
    // s1 serves (its proxy acknowledged its first table), so the move starts.
    const revoked = step(start, { s0: [u(0)], s1: [u(1)] }, { versions: { s0: 1, s1: 1 }, acks: { s1: 1 }, now: 100 });
    expect(revoked.state.effective).toEqual({ s0: [u(0)], s1: [] });
    expect(revoked.changedShards).toEqual(['s0']);
    // The revoking table is s0's next one, at max(1 + 1, now): the version the reconciler publishes it at.
    expect(revoked.state.pending).toMatchObject([{ unit: u(1), from: 's0', to: 's1', revokedAt: 100, revokeVersion: 100 }]);
    expect(revoked.nextDeadline).toBe(100 + LEASE);

    const stale = step(revoked.state, { s0: [u(0)], s1: [u(1)] }, { versions: { s0: 100, s1: 1 }, acks: { s0: 99 }, now: 200 });
    expect(stale.state.effective.s1).toEqual([]);

    const granted = step(revoked.state, { s0: [u(0)], s1: [u(1)] }, { versions: { s0: 100, s1: 1 }, acks: { s0: 100 }, now: 300 });
    expect(granted.state.effective).toEqual({ s0: [u(0)], s1: [u(1)] });
    expect(granted.changedShards).toEqual(['s1']);
    expect(granted.state.history).toMatchObject([{ unit: u(1), revokedAt: 100, acknowledgedAt: 300, grantedAt: 300, grantedBy: 'ack' }]);
  });

  it('grants after the lease expires when no ack comes', () => {
    const start = step(EMPTY_HANDOVER_STATE, { s0: [u(0)], s1: [] }, { now: 0 }).state;
    const revoked = step(start, { s0: [], s1: [u(0)] }, { versions: { s0: 1, s1: 1 }, acks: { s1: 1 }, now: 0 }).state;
    expect(step(revoked, { s0: [], s1: [u(0)] }, { now: LEASE - 1 }).state.effective.s1).toEqual([]);
    const late = step(revoked, { s0: [], s1: [u(0)] }, { now: LEASE });
    expect(late.state.effective.s1).toEqual([u(0)]);
    expect(late.state.history[0]?.grantedBy).toBe('lease-expiry');
  });

  it('records as revoke version the version the revoking table is published at, never below the previous one', () => {
    const start = step(EMPTY_HANDOVER_STATE, { s0: [u(0)], s1: [] }, { now: 0 }).state;
    // A shard whose table is already ahead of the clock (a faster clock before) keeps counting up from it.
    expect(step(start, { s0: [], s1: [u(0)] }, { versions: { s0: 5_000 }, acks: { s1: 0 }, now: 1_000 }).state.pending[0]?.revokeVersion).toBe(5_001);
    expect(step(start, { s0: [], s1: [u(0)] }, { versions: { s0: 5_000 }, acks: { s1: 0 }, now: 9_000 }).state.pending[0]?.revokeVersion).toBe(9_000);
  });

  it('moves nothing to a shard that does not serve yet: the old owner keeps its units until the new one acknowledges a table', () => {
    const start = step(EMPTY_HANDOVER_STATE, { s0: [u(0), u(1)] }, { now: 0 }).state;
    // s1 is planned (its first, empty table is published) but no proxy of it has acknowledged anything.
    const waiting = step(start, { s0: [u(0)], s1: [u(1)] }, { versions: { s0: 1, s1: 1 }, now: 100 });
    expect(waiting.state.effective).toEqual({ s0: [u(0), u(1)], s1: [] });
    expect(waiting.state.pending).toEqual([]);
    expect(waiting.nextDeadline).toBe(100 + SERVING_RECHECK_MS);
    // Its proxy is up: the move starts (revoke, then grant on the old owner's ack), one table round trip.
    const revoked = step(waiting.state, { s0: [u(0)], s1: [u(1)] }, { versions: { s0: 1, s1: 1 }, acks: { s1: 1 }, now: 200 });
    expect(revoked.state.effective).toEqual({ s0: [u(0)], s1: [] });
    const granted = step(revoked.state, { s0: [u(0)], s1: [u(1)] }, { versions: { s0: 200, s1: 1 }, acks: { s0: 200, s1: 1 }, now: 250 });
    expect(granted.state.effective).toEqual({ s0: [u(0)], s1: [u(1)] });
  });

  it('counts a shard as serving on an ack of a table the hub has not read back yet', () => {
    const start = step(EMPTY_HANDOVER_STATE, { s0: [u(0), u(1)] }, { now: 0 }).state;
    // The ack came before the hub read back s1's table, so `acks` cannot judge it yet; the proxy is up all the same.
    const out = handoverStep({ state: start, desired: { s0: [u(0)], s1: [u(1)] }, versions: { s0: 1 }, acks: {}, serving: new Set(['s1']), now: 100, monotonicNow: 100, revokedSeenAt: (r) => r.revokedAt, leaseMs: LEASE, marginMs: 0, leaderSince: 0, historyLimit: 10 });
    expect(out.state.pending).toMatchObject([{ unit: u(1), from: 's0', to: 's1' }]);
  });

  it('never lets two shards own a unit, nor grants before the old owner is fenced', () => {
    const shards = ['s0', 's1', 's2'];
    const action = fc.oneof(
      fc.record({ kind: fc.constant('plan' as const), owners: fc.array(fc.option(fc.constantFrom(...shards)), { minLength: 4, maxLength: 4 }) }),
      fc.record({ kind: fc.constant('ack' as const), shard: fc.constantFrom(...shards) }),
      fc.record({ kind: fc.constant('time' as const), ms: fc.integer({ min: 0, max: LEASE }) }),
    );
    fc.assert(
      fc.property(fc.array(action, { maxLength: 40 }), (actions) => {
        let state = EMPTY_HANDOVER_STATE;
        let desired: Ownership = {};
        let now = 0;
        const versions: Record<string, number> = {};
        const acks: Record<string, number> = {};
        // Per unit: revocations not yet known to be fenced.
        const revocations: { unit: string; from: string; version: number; at: number }[] = [];
        for (const a of actions) {
          if (a.kind === 'plan') {
            desired = Object.fromEntries(shards.map((s) => [s, a.owners.flatMap((o, b) => (o === s ? [u(b)] : []))]));
          } else if (a.kind === 'ack') {
            acks[a.shard] = versions[a.shard] ?? 0;
          } else now += a.ms;
          const before = state.effective;
          const out = step(state, desired, { versions: { ...versions }, acks: { ...acks }, now });
          for (const shard of out.changedShards) versions[shard] = nextTableVersion(versions[shard], now);
          for (const p of out.state.pending) {
            if (p.revokedAt === now && !revocations.some((r) => r.unit === p.unit && r.at === now && r.from === p.from)) {
              revocations.push({ unit: p.unit, from: p.from, version: p.revokeVersion, at: now });
            }
          }
          const owners = new Map<string, string>();
          for (const [shard, units] of Object.entries(out.state.effective)) {
            for (const unit of units) {
              expect(owners.has(unit), `${unit} owned twice`).toBe(false);
              owners.set(unit, shard);
              if ((before[shard] ?? []).includes(unit)) continue;
              for (const r of revocations) {
                if (r.unit !== unit || r.from === shard) continue;
                const fenced = (acks[r.from] ?? -1) >= r.version || now >= r.at + LEASE;
                expect(fenced, `${unit} granted to ${shard} before ${r.from} was fenced`).toBe(true);
              }
            }
          }
          state = out.state;
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('handoverStep: lease expiry with margins and a new leader', () => {
  it('grants without an ack only after max(revokedAt, leaderSince) + lease + margin', () => {
    const base = { versions: { s0: 1, s1: 1 }, acks: { s1: 1 }, serving: new Set(['s1']), revokedSeenAt: (r: HandoverRecord) => r.revokedAt, leaseMs: LEASE, marginMs: 2_000, historyLimit: 10 };
    const start = handoverStep({ ...base, state: EMPTY_HANDOVER_STATE, desired: { s0: [u(0)], s1: [] }, now: 0, monotonicNow: 0, leaderSince: 0 }).state;
    const revoked = handoverStep({ ...base, state: start, desired: { s0: [], s1: [u(0)] }, now: 1_000, monotonicNow: 1_000, leaderSince: 0 });
    expect(revoked.nextDeadline).toBe(1_000 + LEASE + 2_000);
    const early = handoverStep({ ...base, state: revoked.state, desired: { s0: [], s1: [u(0)] }, now: 1_000 + LEASE + 1_999, monotonicNow: 1_000 + LEASE + 1_999, leaderSince: 0 });
    expect(early.state.effective.s1).toEqual([]);
    // A hub that took over at 5 000 counts from then: the old leader may have extended leases until it stepped down.
    const successor = handoverStep({ ...base, state: revoked.state, desired: { s0: [], s1: [u(0)] }, now: 1_000 + LEASE + 2_000, monotonicNow: 1_000 + LEASE + 2_000, leaderSince: 5_000 });
    expect(successor.state.effective.s1).toEqual([]);
    expect(successor.nextDeadline).toBe(5_000 + LEASE + 2_000);
    const granted = handoverStep({ ...base, state: revoked.state, desired: { s0: [], s1: [u(0)] }, now: 5_000 + LEASE + 2_000, monotonicNow: 5_000 + LEASE + 2_000, leaderSince: 5_000 });
    expect(granted.state.effective.s1).toEqual([u(0)]);
    expect(granted.state.history.at(-1)?.grantedBy).toBe('lease-expiry');
  });
});

describe('handoverStep: monotonic lease expiry, whatever the wall clock does', () => {
  const MARGIN = 2_000;
  /** A hub whose wall clock is `wall` and whose monotonic clock is `mono` at each step; seen times kept as the reconciler keeps them. */
  function hub() {
    const revocations = new RevocationClock();
    return (state: HandoverState, desired: Ownership, at: { wall: number; mono: number; leaderSince?: number }) =>
      handoverStep({
        state,
        desired,
        versions: { s0: 1, s1: 1 },
        acks: { s1: 1 },
        serving: new Set(['s1']),
        now: at.wall,
        monotonicNow: at.mono,
        revokedSeenAt: (r) => revocations.seenAt('op', r, at.mono),
        leaseMs: LEASE,
        marginMs: MARGIN,
        leaderSince: at.leaderSince ?? 0,
        historyLimit: 10,
      });
  }

  for (const stepMs of [60_000, -60_000, 3_600_000]) {
    it(`grants by expiry only after lease + margin on the monotonic clock when the wall clock steps ${stepMs > 0 ? 'forward' : 'back'} ${Math.abs(stepMs) / 1000} s`, () => {
      const run = hub();
      const start = run(EMPTY_HANDOVER_STATE, { s0: [u(0)], s1: [] }, { wall: 1_000_000, mono: 0 });
      const revoked = run(start.state, { s0: [], s1: [u(0)] }, { wall: 1_001_000, mono: 1_000 });
      expect(revoked.nextDeadline).toBe(1_000 + LEASE + MARGIN);
      // The wall clock steps by `stepMs` 1 ms after the revocation; the monotonic clock runs on.
      const wallAt = (mono: number): number => 1_001_000 + (mono - 1_000) + stepMs;
      for (const mono of [1_001, 1_000 + LEASE, 1_000 + LEASE + MARGIN - 1]) {
        const early = run(revoked.state, { s0: [], s1: [u(0)] }, { wall: wallAt(mono), mono });
        expect(early.state.effective.s1, `granted at monotonic ${mono}`).toEqual([]);
      }
      const granted = run(revoked.state, { s0: [], s1: [u(0)] }, { wall: wallAt(1_000 + LEASE + MARGIN), mono: 1_000 + LEASE + MARGIN });
      expect(granted.state.effective.s1).toEqual([u(0)]);
      expect(granted.state.history.at(-1)?.grantedBy).toBe('lease-expiry');
    });
  }

  it("a hub that did not record the revocation counts the full lease + margin from its own takeover, never from the record's revokedAt", () => {
    const first = hub();
    const start = first(EMPTY_HANDOVER_STATE, { s0: [u(0)], s1: [] }, { wall: 1_000_000, mono: 0 });
    // Recorded by another hub whose wall clock ran an hour behind: its revokedAt looks long past.
    const revoked = first(start.state, { s0: [], s1: [u(0)] }, { wall: 1_000_000 - 3_600_000, mono: 1_000 });
    const standby = hub();
    // The standby's monotonic clock has another origin: it took over at 50 on it, and first saw the record then.
    const takeover = standby(revoked.state, { s0: [], s1: [u(0)] }, { wall: 1_002_000, mono: 50, leaderSince: 50 });
    expect(takeover.state.effective.s1).toEqual([]);
    expect(takeover.nextDeadline).toBe(50 + LEASE + MARGIN);
    const early = standby(revoked.state, { s0: [], s1: [u(0)] }, { wall: 1_002_000 + LEASE + MARGIN, mono: 50 + LEASE + MARGIN - 1, leaderSince: 50 });
    expect(early.state.effective.s1).toEqual([]);
    const granted = standby(revoked.state, { s0: [], s1: [u(0)] }, { wall: 1_002_000, mono: 50 + LEASE + MARGIN, leaderSince: 50 });
    expect(granted.state.effective.s1).toEqual([u(0)]);
  });
});
