import type { KV, KvEntry } from '@nats-io/kv';
import { JetStreamApiError } from '@nats-io/jetstream';

/**
 * An in-memory KV bucket with JetStream's revision rules (one sequence for the bucket, compare-and-set refused
 * with the API's "wrong last sequence" error), for what the reconciler writes. `reset()` plays the bucket deleted
 * and created again: empty, revisions starting over.
 */
export class FakeKv {
  private sequence = 0;
  readonly values = new Map<string, { value: Uint8Array; revision: number }>();
  /** Every write, in order, as the bucket's watch would deliver it. */
  readonly log: KvEntry[] = [];

  async put(key: string, value: Uint8Array | string): Promise<number> {
    return this.write(key, value);
  }

  async create(key: string, value: Uint8Array | string): Promise<number> {
    if (this.values.has(key)) throw wrongRevision(this.values.get(key)?.revision ?? 0);
    return this.write(key, value);
  }

  async update(key: string, value: Uint8Array | string, revision: number): Promise<number> {
    const known = this.values.get(key)?.revision ?? 0;
    if (known !== revision) throw wrongRevision(known);
    return this.write(key, value);
  }

  /** The entry a watch would deliver for the key's current value. */
  entry(key: string): KvEntry {
    const found = this.log.findLast((e) => e.key === key);
    if (!found) throw new Error(`no entry ${key}`);
    return found;
  }

  reset(): void {
    this.sequence = 0;
    this.values.clear();
  }

  asKv(): KV {
    return this as unknown as KV;
  }

  private write(key: string, value: Uint8Array | string): number {
    const bytes = typeof value === 'string' ? new TextEncoder().encode(value) : value;
    this.sequence += 1;
    this.values.set(key, { value: bytes, revision: this.sequence });
    this.log.push({ key, value: bytes, revision: this.sequence, operation: 'PUT' } as KvEntry);
    return this.sequence;
  }
}

function wrongRevision(last: number): JetStreamApiError {
  return new JetStreamApiError({ code: 400, err_code: 10071, description: `wrong last sequence: ${last}` });
}
