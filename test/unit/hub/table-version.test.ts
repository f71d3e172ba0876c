import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nextTableVersion } from '../../../src/hub/table-version.js';

describe('nextTableVersion', () => {
  it('is the clock in ms for a shard counted from nothing, and previous + 1 when the previous is ahead', () => {
    expect(nextTableVersion(undefined, 1_700_000_000_123.7)).toBe(1_700_000_000_123);
    expect(nextTableVersion(41, 10)).toBe(42);
    expect(nextTableVersion(41, 1_000)).toBe(1_000);
  });

  it('always exceeds the previous version, and after a restart (nothing read back) every version issued before it', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 1_000 }), { maxLength: 30 }), fc.integer({ min: 0, max: 10_000 }), (steps, restartGap) => {
        let now = 1_000_000;
        let version: number | undefined;
        for (const ms of steps) {
          now += ms;
          const next = nextTableVersion(version, now);
          if (version !== undefined) expect(next).toBeGreaterThan(version);
          version = next;
        }
        // A hub that lost the bucket starts from nothing a little later: still above (versions never pass the clock
        // by more than one per table published within the same millisecond).
        const fresh = nextTableVersion(undefined, now + steps.length + 1 + restartGap);
        if (version !== undefined) expect(fresh).toBeGreaterThan(version);
      }),
    );
  });
});
