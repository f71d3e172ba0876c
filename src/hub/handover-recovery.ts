import { compareUnits, unitsOfBuckets, type Ownership, type UnitKey } from '../sharding/index.js';
import type { HandoverRecord, RouteTable } from '../transport/index.js';
import type { HandoverState } from './handover.js';

/**
 * A revoke version no acknowledgement reaches (acks above a shard's published version are refused): a unit held
 * with it is granted on lease expiry alone, once every proxy that may still serve it has fenced itself.
 */
export const LEASE_ONLY_VERSION = Number.MAX_SAFE_INTEGER;
/**
 * The `from` of a unit held for several shards' proxies: no shard's name (Kubernetes names have no parentheses),
 * so neither an ack nor a plan that gives the unit back to one of them ("back-to-owner") frees it early.
 */
export const SEVERAL_SHARDS = '(several)';

export interface RecoveryInput {
  /** The route table published for each shard of the operator. */
  tables: readonly RouteTable[];
  /** Latest acknowledged version per shard. */
  acks: Record<string, number>;
  /** Units per shard as planned now. */
  desired: Ownership;
  now: number;
}

/**
 * An operator's handover state rebuilt from what its published route tables grant (pure), for when the stored
 * record is malformed or gone: nothing is granted that a proxy may still serve elsewhere.
 * - a unit granted in exactly one table stays that shard's;
 * - a unit granted in several tables (which the protocol never publishes) is taken from all of them and held
 *   until the lease has expired;
 * - a planned unit in no table may have been in flight when the record was lost: a shard whose proxy has not
 *   acknowledged its current table may still serve it from an older one, so it is held until that proxy
 *   acknowledges the current table (one such shard) or the lease has expired (several); with every table
 *   acknowledged nobody serves it and it is granted at once.
 * Held units are pending handovers revoked `now`, so handoverStep grants them to the planned shard in time.
 */
export function handoverStateFromTables(input: RecoveryInput): HandoverState {
  const { now } = input;
  const holders = new Map<UnitKey, string[]>();
  const effective: Ownership = {};
  const tables = [...input.tables].sort((a, b) => (a.shard < b.shard ? -1 : a.shard > b.shard ? 1 : 0));
  for (const table of tables) {
    effective[table.shard] = [];
    for (const unit of unitsOfBuckets(table.clusters.map((c) => [c.name, c.buckets] as const))) {
      holders.set(unit, [...(holders.get(unit) ?? []), table.shard]);
    }
  }
  const pending: HandoverRecord[] = [];
  const hold = (unit: UnitKey, from: string, revokeVersion: number): void => {
    pending.push({ unit, from, to: null, revokedAt: now, revokeVersion });
  };
  for (const [unit, shards] of holders) {
    const [only, ...others] = shards as [string, ...string[]];
    if (others.length === 0) effective[only]?.push(unit);
    else hold(unit, SEVERAL_SHARDS, LEASE_ONLY_VERSION);
  }
  const unacknowledged = tables.filter((t) => (input.acks[t.shard] ?? -1) < t.version);
  const [first] = unacknowledged;
  if (first) {
    // One such shard: its ack of its current table frees the unit (given back to it, only it may serve it).
    const [from, revokeVersion] = unacknowledged.length === 1 ? [first.shard, first.version] : [SEVERAL_SHARDS, LEASE_ONLY_VERSION];
    const planned = [...new Set(Object.values(input.desired).flat())].sort(compareUnits);
    for (const unit of planned) if (!holders.has(unit)) hold(unit, from, revokeVersion);
  }
  for (const units of Object.values(effective)) units.sort(compareUnits);
  return { effective, pending: pending.sort((a, b) => compareUnits(a.unit, b.unit)), history: [] };
}
