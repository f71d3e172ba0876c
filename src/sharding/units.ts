/**
 * The unit of ownership, (cluster, bucket), and the one place it changes form. From the plan to the handover
 * records a unit is a `<bucket>@<cluster>` key (stored in KV that way, so the form must not change); the
 * planner's assignments and the route tables list a shard's units as buckets per cluster instead, and go through
 * `unitsOfBuckets` and `bucketsOfUnits`.
 */

export type UnitKey = string;

/** Units per shard. */
export type Ownership = Record<string, UnitKey[]>;

export function unitKey(cluster: string, bucket: number): UnitKey {
  return `${bucket}@${cluster}`;
}

export function parseUnitKey(key: UnitKey): { cluster: string; bucket: number } {
  const at = key.indexOf('@');
  return { bucket: Number(key.slice(0, at)), cluster: key.slice(at + 1) };
}

/** Cluster name order, then bucket order. */
export function compareUnits(a: UnitKey, b: UnitKey): number {
  const ua = parseUnitKey(a);
  const ub = parseUnitKey(b);
  return ua.cluster === ub.cluster ? ua.bucket - ub.bucket : ua.cluster < ub.cluster ? -1 : 1;
}

/**
 * The units of one shard listed as buckets per cluster (an assignment's `Object.entries`, a route table's
 * clusters), in the order given: the order of a plan's units is the order its handovers are decided in.
 */
export function unitsOfBuckets(clusterBuckets: Iterable<readonly [cluster: string, buckets: readonly number[]]>): UnitKey[] {
  const units: UnitKey[] = [];
  for (const [cluster, buckets] of clusterBuckets) for (const bucket of buckets) units.push(unitKey(cluster, bucket));
  return units;
}

/** The buckets of each cluster the units name, sorted; a Map, so any cluster name is a safe key. */
export function bucketsOfUnits(units: Iterable<UnitKey>): Map<string, number[]> {
  const buckets = new Map<string, number[]>();
  for (const unit of units) {
    const { cluster, bucket } = parseUnitKey(unit);
    const list = buckets.get(cluster);
    if (list) list.push(bucket);
    else buckets.set(cluster, [bucket]);
  }
  for (const list of buckets.values()) list.sort((a, b) => a - b);
  return buckets;
}
