/**
 * Whether a proxy whose lease was last extended at `extendedAt` (its monotonic clock, read before it asked; undefined:
 * no extension it can trust) must stop serving: `marginMs` before the lease ends, so that the hub, counting the same
 * lease plus its own margin on its own monotonic clock from after it answered, grants the units elsewhere only once
 * this proxy has stopped (all in ms). Only durations on one clock are compared: a wall-clock step moves neither.
 */
export function leaseExpired(options: { extendedAt: number | undefined; leaseSeconds: number; marginMs: number; now: number }): boolean {
  if (options.extendedAt === undefined) return true;
  return options.now >= options.extendedAt + options.leaseSeconds * 1000 - options.marginMs;
}
