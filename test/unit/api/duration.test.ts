import { describe, expect, it } from 'vitest';
import { durationMs, formatDuration, parseDuration } from '../../../src/api/index.js';

describe('durations', () => {
  it('parses Go durations into milliseconds', () => {
    expect(durationMs('200ms')).toBe(200);
    expect(durationMs('1m')).toBe(60_000);
    expect(durationMs('1h30m')).toBe(5_400_000);
    expect(parseDuration('1.5s')).toBe(1_500);
    expect(parseDuration('1500us')).toBe(1.5);
  });

  it('refuses what is not one: a bare number, a sign, an unknown unit, nothing', () => {
    for (const text of ['6', '-1s', '5d', '', 's', '1 s', '1s '] as const) expect(parseDuration(text)).toBeUndefined();
  });

  it('writes whole milliseconds back as the shortest text that parses to them', () => {
    const cases: [number, string][] = [
      [0, '0s'],
      [500, '500ms'],
      [1_500, '1500ms'],
      [6_000, '6s'],
      [90_000, '1m30s'],
      [3_600_000, '1h'],
      [5_430_000, '1h30m30s'],
    ];
    for (const [ms, text] of cases) {
      expect(formatDuration(ms)).toBe(text);
      expect(parseDuration(text)).toBe(ms);
    }
    expect(() => formatDuration(1.5)).toThrow(RangeError);
  });
});
