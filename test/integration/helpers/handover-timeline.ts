import { expect } from 'vitest';
import type { OperatorStatus } from '../../../src/hub/index.js';
import type { HandoverRecord } from '../../../src/transport/index.js';
import type { ReconcileRecord } from './e2e-shard.js';

/**
 * The "never two owners" logic of a live handover, read from the hub's handover records and the operators' reconcile
 * records (e2e-handover.test.ts states it inline; shard-selectors.test.ts uses it from here).
 */

/** The published owner of every unit `<bucket>@<cluster>` in the hub's status of one operator (throws if a unit has two). */
export function publishedOwners(status: OperatorStatus): Map<string, string> {
  const found = new Map<string, string>();
  for (const s of status.shards) {
    for (const [c, buckets] of Object.entries(s.buckets)) {
      for (const b of buckets) {
        const unit = `${b}@${c}`;
        if (found.has(unit)) throw new Error(`unit ${unit} is in the tables of ${found.get(unit)} and ${s.name}`);
        found.set(unit, s.name);
      }
    }
  }
  return found;
}

/** One shard's ownership of a unit: from its grant; its writes count until `fence` (the revocation acknowledged, or the lease ran out). */
export interface OwnershipPeriod {
  shard: string | null;
  from: number;
  fence: number;
}

/** When the old owner could no longer write: the hub saw its proxy acknowledge the revocation, or its lease ran out. */
export function fenceOf(h: HandoverRecord, leaseSeconds: number): number {
  return h.acknowledgedAt ?? h.revokedAt + leaseSeconds * 1000;
}

/** Each move was granted only after its old owner acknowledged the revocation or its lease ran out. */
export function expectGrantsAfterFence(moves: readonly HandoverRecord[], leaseSeconds: number): void {
  for (const h of moves) {
    if (h.grantedBy === 'ack') {
      expect(h.acknowledgedAt).toBeGreaterThanOrEqual(h.revokedAt);
      expect(h.grantedAt).toBeGreaterThanOrEqual(h.acknowledgedAt as number);
    } else {
      expect(h.grantedBy).toBe('lease-expiry');
      expect(h.grantedAt).toBeGreaterThanOrEqual(h.revokedAt + leaseSeconds * 1000);
    }
  }
}

/**
 * Who owned a unit when, from its handovers: the owner before, then each grantee from its grant. A period ends (for
 * writes) at the fence of the move that took the unit away. Several moves of one unit are allowed.
 */
export function ownershipPeriods(
  unit: string,
  before: ReadonlyMap<string, string>,
  after: ReadonlyMap<string, string>,
  moves: readonly HandoverRecord[],
  leaseSeconds: number,
): OwnershipPeriod[] {
  const periods: OwnershipPeriod[] = [];
  let owner: string | null = before.get(unit) ?? null;
  let from = -Infinity;
  for (const h of moves.filter((m) => m.unit === unit).sort((a, b) => a.revokedAt - b.revokedAt)) {
    expect(h.from).toBe(owner);
    periods.push({ shard: owner, from, fence: fenceOf(h, leaseSeconds) });
    owner = h.to;
    from = h.grantedAt as number;
  }
  expect(owner).toBe(after.get(unit));
  periods.push({ shard: owner, from, fence: Infinity });
  return periods;
}

/**
 * One object's reconciles, checked against its unit's periods: never two shards at once (every other shard's
 * reconciles finished before this one started), and each only while the timeline says its shard owns the unit: from
 * its grant on, and a write only before the fence. Returns the shards that reconciled it.
 */
export function expectOneOwnerAtATime(label: string, records: readonly ReconcileRecord[], periods: readonly OwnershipPeriod[]): Set<string> {
  const lastFinished = new Map<string, number>();
  for (const r of [...records].sort((a, b) => a.started - b.started)) {
    for (const [shard, finishedAt] of lastFinished) if (shard !== r.shard) expect(finishedAt, `${label}: ${shard} then ${r.shard}`).toBeLessThan(r.started);
    lastFinished.set(r.shard, Math.max(r.finished, lastFinished.get(r.shard) ?? 0));
    const owning = periods.some((p) => p.shard === r.shard && r.started >= p.from && (!r.wrote || r.started < p.fence));
    expect(owning, `${r.shard} reconciled ${label} at ${r.started} (wrote: ${r.wrote}) outside its ownership ${JSON.stringify(periods)}`).toBe(true);
  }
  return new Set(lastFinished.keys());
}
