/** Whether a proxy whose leased source was last in contact at `contactAt` must stop serving (all in ms). */
export function leaseExpired(options: { contactAt: number; leaseSeconds: number; now: number }): boolean {
  return options.now - options.contactAt > options.leaseSeconds * 1000;
}
