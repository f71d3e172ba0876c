import type { Counted } from '../judgement/judge.js';

/** Counts one answered request in its cluster's request metrics: the one place every way in counts. */
export function observe(counted: Counted, code: number, started: number): void {
  counted.entry?.metrics.observe(counted.verb, counted.resource, code, (performance.now() - started) / 1000);
}
