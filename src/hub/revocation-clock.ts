import type { HandoverRecord } from '../transport/index.js';

/**
 * When this hub process first saw each pending revocation, on its monotonic clock: what a grant by expiry is
 * counted from. A record's `revokedAt` was read on a wall clock (perhaps another hub's, perhaps before a step) and
 * is shown to people only; a revocation this process did not record counts from when it first met it, and never
 * before it became leader (handoverStep's `leaderSince`): test/unit/hub/handover.test.ts, "monotonic".
 */
export class RevocationClock {
  private readonly seen = new Map<string, number>();

  /** When `record` of `operator` was first seen; `at` (and remembered) if never before. */
  seenAt(operator: string, record: HandoverRecord, at: number): number {
    const key = revocationKey(operator, record);
    const known = this.seen.get(key);
    if (known !== undefined) return known;
    this.seen.set(key, at);
    return at;
  }

  /** The revocation's table is written at `at`: extensions may have been given until then, so it counts from there. */
  recorded(operator: string, record: HandoverRecord, at: number): void {
    this.seen.set(revocationKey(operator, record), at);
  }

  /** Forgets the operator's revocations no longer pending. */
  retain(operator: string, pending: readonly HandoverRecord[]): void {
    const keep = new Set(pending.map((p) => revocationKey(operator, p)));
    const prefix = `${operator}\u0000`;
    for (const key of [...this.seen.keys()]) if (key.startsWith(prefix) && !keep.has(key)) this.seen.delete(key);
  }
}

/** One revocation: the unit, its old owner and the version that revoked it (its wall `revokedAt` is not part of it). */
function revocationKey(operator: string, record: HandoverRecord): string {
  return `${operator}\u0000${record.unit}\u0000${record.from}\u0000${record.revokeVersion}`;
}
