import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { handoverStep, type HandoverState } from '../../../src/hub/handover.js';
import { parseUnitKey, unitKey, type Ownership } from '../../../src/sharding/index.js';
import { LEASE_ONLY_VERSION, SEVERAL_SHARDS, handoverStateFromTables } from '../../../src/hub/handover-recovery.js';
import type { RouteTable } from '../../../src/transport/index.js';
import { clusterFixture, routeTableFixture } from '../proxy/route-table-fixture.js';

const u = (b: number): string => unitKey('a', b);
const LEASE = 10_000;

function table(shard: string, version: number, buckets: number[]): RouteTable {
  return routeTableFixture({ operator: 'ns/op', shard, version, clusters: [clusterFixture('a', buckets)] });
}

describe('handoverStateFromTables', () => {
  it('gives each shard what its table grants; with every table acknowledged nothing is held', () => {
    const state = handoverStateFromTables({
      tables: [table('s1', 10, [2, 0]), table('s0', 10, [1])],
      acks: { s0: 10, s1: 10 },
      desired: { s0: [u(1), u(3)], s1: [u(0), u(2)] },
      now: 500,
    });
    expect(state).toEqual({ effective: { s0: [u(1)], s1: [u(0), u(2)] }, pending: [], history: [] });
  });

  it('holds a unit granted twice until the lease expires, whatever is acknowledged', () => {
    const state = handoverStateFromTables({ tables: [table('s0', 10, [0, 1]), table('s1', 10, [1])], acks: { s0: 10, s1: 10 }, desired: {}, now: 500 });
    expect(state.effective).toEqual({ s0: [u(0)], s1: [] });
    expect(state.pending).toEqual([{ unit: u(1), from: SEVERAL_SHARDS, to: null, revokedAt: 500, revokeVersion: LEASE_ONLY_VERSION }]);
  });

  it('holds a planned unit in no table while a proxy may still serve it from an older table', () => {
    const one = handoverStateFromTables({ tables: [table('s0', 10, [0]), table('s1', 12, [])], acks: { s0: 10, s1: 11 }, desired: { s1: [u(0), u(5)] }, now: 500 });
    // Only s1 may still apply an older table: its ack of the current one (12) frees the unit.
    expect(one.pending).toEqual([{ unit: u(5), from: 's1', to: null, revokedAt: 500, revokeVersion: 12 }]);
    const two = handoverStateFromTables({ tables: [table('s0', 10, [0]), table('s1', 12, [])], acks: {}, desired: { s1: [u(5)] }, now: 500 });
    expect(two.pending).toEqual([{ unit: u(5), from: SEVERAL_SHARDS, to: null, revokedAt: 500, revokeVersion: LEASE_ONLY_VERSION }]);
  });

  it('from any published tables, the recovered steps never put a unit in two shards, nor grant a held unit early', () => {
    const shards = ['s0', 's1', 's2'];
    fc.assert(
      fc.property(
        fc.array(fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 6 }), { minLength: 3, maxLength: 3 }),
        fc.array(fc.option(fc.constantFrom(...shards)), { minLength: 6, maxLength: 6 }),
        fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }),
        (granted, owners, acked) => {
          const tables = shards.map((s, i) => table(s, 100 + i, [...new Set(granted[i])]));
          const acks = Object.fromEntries(shards.flatMap((s, i) => (acked[i] ? [[s, 100 + i]] : [])));
          const desired: Ownership = Object.fromEntries(shards.map((s) => [s, owners.flatMap((o, b) => (o === s ? [u(b)] : []))]));
          const start = 1_000;
          let state: HandoverState = handoverStateFromTables({ tables, acks, desired, now: start });
          for (const now of [start, start + 1, start + LEASE - 1, start + LEASE]) {
            const versions = Object.fromEntries(tables.map((t) => [t.shard, t.version]));
            const out = handoverStep({ state, desired, versions, acks, serving: new Set(Object.keys(acks)), now, monotonicNow: now, revokedSeenAt: (r) => r.revokedAt, leaseMs: LEASE, marginMs: 0, leaderSince: 0, historyLimit: 10 });
            const seen = new Set<string>();
            for (const [shard, units] of Object.entries(out.state.effective)) {
              for (const unit of units) {
                expect(seen.has(unit), `${unit} in two shards`).toBe(false);
                seen.add(unit);
                // Granted to a shard whose table lacked it: before the lease, every other shard's proxy must be known
                // not to serve it (its current table lacks it and it acknowledged that table).
                if (now < start + LEASE && !tables.find((t) => t.shard === shard)?.clusters[0]?.buckets.includes(parseUnitKey(unit).bucket)) {
                  for (const other of tables.filter((t) => t.shard !== shard)) {
                    expect(other.clusters[0]?.buckets.includes(parseUnitKey(unit).bucket), `${unit} still in ${other.shard}'s table`).toBe(false);
                    expect(acks[other.shard], `${unit} granted to ${shard} before ${other.shard} acknowledged`).toBe(other.version);
                  }
                }
              }
            }
            state = out.state;
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
