import { describe, expect, it } from 'vitest';
import { LogThrottle } from '../../../src/runtime/index.js';

describe('LogThrottle', () => {
  it('lets one line per key through each interval, with the count held back since the last', () => {
    let now = 0;
    const throttle = new LogThrottle(1_000, () => now);
    expect(throttle.admit('a')).toEqual({ suppressed: 0 });
    for (let i = 0; i < 5; i++) expect(throttle.admit('a')).toBeUndefined();
    // Another key has its own interval.
    expect(throttle.admit('b')).toEqual({ suppressed: 0 });
    now = 999;
    expect(throttle.admit('a')).toBeUndefined();
    now = 1_000;
    expect(throttle.admit('a')).toEqual({ suppressed: 6 });
    now = 5_000;
    expect(throttle.admit('a')).toEqual({ suppressed: 0 });
  });

  it('forgets the oldest key past its limit, so a caller that errs in its keys cannot grow it', () => {
    const throttle = new LogThrottle(1_000, () => 0, 2);
    throttle.admit('a');
    throttle.admit('b');
    throttle.admit('c');
    // 'a' was forgotten: it logs at once again; 'c' is still held.
    expect(throttle.admit('a')).toEqual({ suppressed: 0 });
    expect(throttle.admit('c')).toBeUndefined();
  });
});
