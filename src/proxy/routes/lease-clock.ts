import { readFileSync } from 'node:fs';

/**
 * The clock a proxy judges its lease by. `monotonic` (ms) is never stepped (NTP, a VM resume, a bad wall clock
 * leave it alone); `boot` names its epoch: two readings compare only under the same one. Wall time (Date.now) is for
 * what people read, never for a lease.
 */
export interface LeaseClock {
  monotonic: () => number;
  /** The epoch of `monotonic` readings kept across a restart; undefined: none outlives the process. */
  boot: string | undefined;
}

/** CLOCK_MONOTONIC in ms (process.hrtime): one clock for every process of a boot, so a restart can read it on. */
export function monotonicNow(): number {
  return Number(process.hrtime.bigint() / 1_000n) / 1_000;
}

/** This boot's id (Linux), or undefined where there is none: then a stored extension is never trusted. */
export function bootId(path = '/proc/sys/kernel/random/boot_id'): string | undefined {
  try {
    const id = readFileSync(path, 'utf8').trim();
    return id === '' ? undefined : id;
  } catch {
    return undefined;
  }
}

export function systemLeaseClock(): LeaseClock {
  return { monotonic: monotonicNow, boot: bootId() };
}
