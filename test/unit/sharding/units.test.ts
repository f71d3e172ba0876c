import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bucketsOfUnits, compareUnits, parseUnitKey, unitKey, unitsOfBuckets } from '../../../src/sharding/index.js';

const cluster = fc.constantFrom('a', 'b', 'eu-1', 'constructor', '__proto__');
const unit = fc.record({ cluster, bucket: fc.integer({ min: 0, max: 63 }) });

describe('units', () => {
  it('keeps the `<bucket>@<cluster>` form handover records are stored in', () => {
    expect(unitKey('eu-1', 7)).toBe('7@eu-1');
    expect(parseUnitKey('7@eu-1')).toEqual({ cluster: 'eu-1', bucket: 7 });
  });

  it('goes to buckets per cluster and back without losing or adding a unit, sorted', () => {
    fc.assert(
      fc.property(fc.uniqueArray(unit, { selector: (u) => unitKey(u.cluster, u.bucket) }), (drawn) => {
        const units = drawn.map((u) => unitKey(u.cluster, u.bucket));
        const buckets = bucketsOfUnits(units);
        for (const list of buckets.values()) expect(list).toEqual([...list].sort((x, y) => x - y));
        expect([...unitsOfBuckets(buckets)].sort(compareUnits)).toEqual([...units].sort(compareUnits));
      }),
    );
  });

  it('lists the units of buckets per cluster in the order given', () => {
    expect(unitsOfBuckets(Object.entries({ b: [3, 1], a: [0] }))).toEqual(['3@b', '1@b', '0@a']);
  });
});
