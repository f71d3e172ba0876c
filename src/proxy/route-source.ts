import type { RouteTable } from '../transport/index.js';

/** What a route source reports: each table it learns of, and whether it is in contact with the hub's side. */
export interface RouteSourceHandlers {
  onTable(table: RouteTable): void;
  /** `connected` false = the source lost contact (the lease clock runs); true = contact (re)gained. */
  onContact(connected: boolean): void;
}

/**
 * Where route tables come from: a file now, the NATS KV bucket the hub writes when src/transport provides it.
 * The enforcement code sees only this interface.
 */
export interface RouteSource {
  /** Human-readable origin for logs and /readyz (a file path, a KV key). */
  readonly description: string;
  /**
   * True when the source holds a lease on the hub's side: losing contact for longer than the table's
   * leaseSeconds then fences the proxy. A static file has no lease and never fences.
   */
  readonly leased: boolean;
  start(handlers: RouteSourceHandlers): Promise<void>;
  /** Tells the hub this table is applied (watches of revoked buckets ended); absent for sources without a hub. */
  acknowledge?(table: RouteTable): Promise<void>;
  stop(): Promise<void>;
}
