import { compareUnits, type Ownership, type UnitKey } from '../sharding/index.js';
import type { HandoverRecord, HandoverStateRecord } from '../transport/index.js';
import { nextTableVersion } from './table-version.js';

/**
 * Moving units between shards without ever letting two shards own one (pure: time is an argument).
 * A move is: revoke from the old shard (its next route table lacks the unit), then grant to the new shard once
 * the old one acknowledged that table or its lease has expired. A move starts only once the new shard serves (its
 * proxy has acknowledged a table): until then the old shard keeps the unit, so adding a shard whose pod is not up
 * yet leaves nothing unserved (kubernetes-controller-sharding drains only to ready shards, for the same reason).
 */

/** What the published route tables grant, the units in flight, and the latest completed handovers (newest last). */
export type HandoverState = Omit<HandoverStateRecord, 'schema' | 'operator'>;

export interface HandoverStepInput {
  state: HandoverState;
  desired: Ownership;
  /** Published route-table version per shard. */
  versions: Record<string, number>;
  /** Latest acknowledged version per shard. */
  acks: Record<string, number>;
  /**
   * The shards whose proxy has acknowledged a table, any table: they serve, so units may move to them. Wider than
   * `acks`, which counts only versions the hub has seen published (an ack may come before the hub reads back the
   * table it wrote).
   */
  serving: ReadonlySet<string>;
  /** Wall time: recorded for people (`revokedAt`, `grantedAt`) and in table versions, never judged by. */
  now: number;
  /** This hub's monotonic clock now: the only clock a grant by expiry is timed on. */
  monotonicNow: number;
  /**
   * When this hub first saw (or recorded) a pending revocation, on its monotonic clock: `monotonicNow` for one it has
   * not seen before. A record's `revokedAt` is another clock's (or this one's before a step) and is never read.
   */
  revokedSeenAt: (record: HandoverRecord) => number;
  /**
   * How long a shard's proxy may keep serving on its last lease extension: after that it has fenced itself. The
   * proxy counts on its monotonic clock from before it asked for the extension, the hub on its own from after it
   * recorded the revocation, so a grant at `seen + leaseMs + marginMs` comes after the revoked proxy's fence as long
   * as the two clocks' rates differ by less than the margins over one lease (docs/control-plane.md, "Leases").
   */
  leaseMs: number;
  /** Added to the lease before a grant without acknowledgement. */
  marginMs: number;
  /**
   * When this hub became leader, on its monotonic clock: a previous leader may have extended leases until it stepped
   * down, on a clock this one cannot read, so lease expiry is counted from no earlier than this.
   */
  leaderSince: number;
  historyLimit: number;
}

export interface HandoverStepOutput {
  state: HandoverState;
  /** Shards whose granted units changed: each must get exactly one new route table, at `nextTableVersion(version, now)`. */
  changedShards: string[];
  /**
   * When a pending handover's lease expires next, or a move waiting for its new owner is looked at again (re-run the
   * step then), on the monotonic clock of `monotonicNow`; or undefined.
   */
  nextDeadline?: number;
}

export const EMPTY_HANDOVER_STATE: HandoverState = { effective: {}, pending: [], history: [] };

/**
 * How soon a move waiting for its new owner to serve is looked at again. A shard's first ack starts a pass itself;
 * this bounds the wait when that pass judged the ack before the shard's table was read back.
 */
export const SERVING_RECHECK_MS = 1_000;

export function handoverStep(input: HandoverStepInput): HandoverStepOutput {
  const { desired, now } = input;
  const owned = new Map<string, Set<UnitKey>>();
  for (const [shard, units] of Object.entries(input.state.effective)) owned.set(shard, new Set(units));
  for (const shard of Object.keys(desired)) if (!owned.has(shard)) owned.set(shard, new Set());
  const ownerOf = new Map<UnitKey, string>();
  for (const [shard, units] of owned) for (const unit of units) ownerOf.set(unit, shard);
  const desiredOwner = new Map<UnitKey, string>();
  for (const [shard, units] of Object.entries(desired)) for (const unit of units) desiredOwner.set(unit, shard);

  const grantableAt = (record: HandoverRecord): number => Math.max(input.revokedSeenAt(record), input.leaderSince) + input.leaseMs + input.marginMs;
  const changed = new Set<string>();
  const newShards = Object.keys(desired).filter((s) => !(s in input.state.effective));
  for (const shard of newShards) changed.add(shard);
  const grant = (unit: UnitKey, shard: string): void => {
    const units = owned.get(shard) ?? new Set<UnitKey>();
    units.add(unit);
    owned.set(shard, units);
    ownerOf.set(unit, shard);
    changed.add(shard);
  };
  const history = [...input.state.history];
  const pending: HandoverRecord[] = [];

  for (const old of input.state.pending) {
    const record: HandoverRecord = { ...old, to: desiredOwner.get(old.unit) ?? null };
    if (record.acknowledgedAt === undefined && (input.acks[record.from] ?? -1) >= record.revokeVersion) record.acknowledgedAt = now;
    const grantedBy =
      record.to === record.from
        ? 'back-to-owner'
        : record.acknowledgedAt !== undefined
          ? 'ack'
          : input.monotonicNow >= grantableAt(record)
            ? 'lease-expiry'
            : undefined;
    if (grantedBy === undefined) {
      pending.push(record);
      continue;
    }
    if (record.to !== null) grant(record.unit, record.to);
    history.push({ ...record, grantedAt: now, grantedBy });
  }
  const inFlight = new Set(pending.map((p) => p.unit));

  const revoke = (unit: UnitKey, from: string, to: string | null): void => {
    owned.get(from)?.delete(unit);
    ownerOf.delete(unit);
    changed.add(from);
    pending.push({ unit, from, to, revokedAt: now, revokeVersion: nextTableVersion(input.versions[from], now) });
  };
  let waiting = false;
  for (const [unit, shard] of desiredOwner) {
    if (inFlight.has(unit)) continue;
    const current = ownerOf.get(unit);
    if (current === shard) continue;
    if (current === undefined) grant(unit, shard);
    else if (input.serving.has(shard)) revoke(unit, current, shard);
    else waiting = true;
  }
  for (const [unit, shard] of [...ownerOf]) {
    if (!desiredOwner.has(unit) && !inFlight.has(unit)) revoke(unit, shard, null);
  }

  const effective: Ownership = {};
  for (const [shard, units] of owned) {
    // A shard that is no longer wanted disappears once it owns nothing (its last, empty table stays published).
    if (units.size === 0 && !(shard in desired) && !changed.has(shard)) continue;
    effective[shard] = [...units].sort(compareUnits);
  }
  const deadlines = [...pending.map(grantableAt), ...(waiting ? [input.monotonicNow + SERVING_RECHECK_MS] : [])];
  return {
    state: { effective, pending, history: history.slice(-input.historyLimit) },
    changedShards: [...changed].sort(),
    ...(deadlines.length ? { nextDeadline: Math.min(...deadlines) } : {}),
  };
}
