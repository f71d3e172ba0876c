/**
 * Whether a proxy whose lease was last extended at `extendedAt` (its own clock, taken before it asked) must stop
 * serving: `marginMs` before the lease ends, so that the hub, counting the same lease plus its own margin from
 * after it answered, grants the units elsewhere only once this proxy has stopped (all in ms).
 */
export function leaseExpired(options: { extendedAt: number; leaseSeconds: number; marginMs: number; now: number }): boolean {
  return options.now >= options.extendedAt + options.leaseSeconds * 1000 - options.marginMs;
}
