import type { AckRule, RouteTable } from '../../transport/index.js';

/** What a route source reports: each table it learns of, its connection, and the hub's lease extensions. */
export interface RouteSourceHandlers {
  onTable(table: RouteTable): void;
  /** The transport's connection state: shown in metrics and logs, never used for the lease. */
  onContact(connected: boolean): void;
  /**
   * The hub extended the lease of this shard, for an acknowledged table as new as the hub's: `askedAt` is this
   * proxy's monotonic clock (the controller's lease clock) before it asked, so the lease it counts from there ends
   * before the one the hub counts.
   */
  onRenewal(askedAt: number): void;
}

/**
 * Where route tables come from: a file now, the NATS KV bucket the hub writes when src/transport provides it.
 * The enforcement code sees only this interface.
 */
export interface RouteSource {
  /** Human-readable origin for logs and /readyz (a file path, a KV key). */
  readonly description: string;
  /**
   * True when the source holds a lease on the hub's side: the proxy serves only until its last extension plus the
   * table's leaseSeconds (minus a margin), then fences itself. A static file has no lease and never fences.
   */
  readonly leased: boolean;
  start(handlers: RouteSourceHandlers): Promise<void>;
  /**
   * Tells the hub this table is applied (watches of revoked buckets ended), with the table's cluster rules in force
   * here; absent for sources without a hub. Called again for the same table when those rules change.
   */
  acknowledge?(table: RouteTable, rules?: readonly AckRule[]): Promise<void>;
  stop(): Promise<void>;
}
