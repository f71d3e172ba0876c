/**
 * Durations as Go and Kubernetes write them (`500ms`, `15s`, `2m`, `1h30m`): in manifests (CircuitBreaker,
 * FaultInjection) and in every duration flag of `ctrlmesh`. One syntax, one parser, one way back to text.
 */

/** The syntax: one or more `<number><unit>` parts, units ns, us (µs), ms, s, m, h; no sign, no bare number. */
export const DURATION_PATTERN = '^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$';

const WHOLE = new RegExp(DURATION_PATTERN);
const PART = /([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)/g;
const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A duration in milliseconds (possibly fractional: `1500us` is 1.5), or undefined when `text` is not one. */
export function parseDuration(text: string): number | undefined {
  if (!WHOLE.test(text)) return undefined;
  let total = 0;
  for (const [, amount, unit] of text.matchAll(PART)) total += Number(amount) * (UNIT_MS[unit as string] as number);
  // To the nanosecond, the finest unit: `1.1s` is 1100 ms, not 1100.0000000000002.
  return Math.round(total * 1e6) / 1e6;
}

/** A duration the schema has already checked (a manifest's field), in milliseconds. */
export function durationMs(text: string): number {
  return parseDuration(text) ?? Number.NaN;
}

/** Whole milliseconds as the shortest duration text that parses back to them: 90000 -> `1m30s`, 1500 -> `1500ms`, 0 -> `0s`. */
export function formatDuration(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0) throw new RangeError(`a duration is a whole, non-negative number of milliseconds, not ${ms}`);
  if (ms === 0) return '0s';
  if (ms % 1000 !== 0) return `${ms}ms`;
  const parts: string[] = [];
  let rest = ms / 1000;
  for (const [unit, size] of [['h', 3600], ['m', 60], ['s', 1]] as const) {
    if (rest >= size) parts.push(`${Math.floor(rest / size)}${unit}`);
    rest %= size;
  }
  return parts.join('');
}
