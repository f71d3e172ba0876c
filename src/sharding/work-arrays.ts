type TypedArray = Int32Array | Float64Array | Uint8Array;

/**
 * A work array kept between calls: `current` when it holds `length` entries, else a new one that does. Reusing them
 * keeps a long-lived planner's changes from allocating fleet-sized arrays each time (whose garbage brought on the
 * major collections of the fleet's heap). Entries are left as the last call left them: the caller clears what it reads.
 */
export function workArray<T extends TypedArray>(current: T, length: number, make: new (length: number) => T): T {
  return current.length >= length ? current : new make(length);
}
