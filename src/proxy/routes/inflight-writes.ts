/**
 * The writes the proxy let through whose answer has not come back yet. A new route table is acknowledged only
 * once the writes admitted under the tables before it are answered: after the acknowledgement the hub may grant a
 * revoked unit to another shard, and a write of the old owner must not still be on its way to the API server then.
 */
export class InflightWrites {
  private readonly open = new Set<Promise<void>>();

  /** Registers a write; returns it unchanged. */
  track<T>(write: Promise<T>): Promise<T> {
    const answered = write.then(
      () => undefined,
      () => undefined,
    );
    this.open.add(answered);
    void answered.then(() => this.open.delete(answered));
    return write;
  }

  get size(): number {
    return this.open.size;
  }

  /** Resolves once every write open now is answered (or failed); writes admitted later are not waited for. */
  async drained(): Promise<void> {
    await Promise.all([...this.open]);
  }
}
