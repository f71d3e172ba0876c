/**
 * The benchmark harness API: a benchmark module (bench/<name>.ts) default-exports a {@link Benchmark}; main.ts runs
 * each one, prints its rows as a table and writes them to bench/results/<name>.json.
 */
export type Figure = number | string | boolean;

/** One line of a benchmark's table: a case name and its figures (keys become columns). */
export interface BenchRow {
  case: string;
  [figure: string]: Figure;
}

export interface BenchContext {
  /** Progress for long runs, on stderr. */
  progress(message: string): void;
}

export interface Benchmark {
  /** Matches the module's file name; `npm run bench -- <name>` runs only the benchmarks named. */
  name: string;
  description: string;
  run(ctx: BenchContext): Promise<BenchRow[]> | BenchRow[];
}

export interface Timing {
  /** Operations measured. */
  ops: number;
  nsPerOp: number;
  opsPerSec: number;
}

/**
 * CPU time of this process (user + system) in nanoseconds. Benchmarks measure it rather than wall time so that
 * other work on a shared machine inflates the figures less.
 */
export function cpuNs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) * 1000;
}

/** Runs `fn` in growing batches until `minMs` of CPU time, after a warm-up; returns the mean cost per call. */
export function timePerOp(fn: () => void, minMs = 500): Timing {
  for (let i = 0; i < 1000; i++) fn();
  let batch = 1000;
  let ops = 0;
  let elapsed = 0;
  while (elapsed < minMs * 1e6) {
    const start = cpuNs();
    for (let i = 0; i < batch; i++) fn();
    elapsed += cpuNs() - start;
    ops += batch;
    batch *= 2;
  }
  const nsPerOp = elapsed / ops;
  return { ops, nsPerOp: round(nsPerOp, 1), opsPerSec: Math.round(1e9 / nsPerOp) };
}

export interface Samples {
  runs: number;
  medianMs: number;
  p95Ms: number;
  minMs: number;
}

/**
 * Times `runs` separate calls of a slow operation (after `warmup` untimed ones); CPU milliseconds per call. `prepare`
 * (untimed) builds what each call consumes, e.g. a fresh planner to apply one change to.
 */
export function sampleMs<T>(fn: (prepared: T) => void, options: { runs: number; warmup?: number; prepare: () => T }): Samples {
  const { prepare } = options;
  for (let i = 0; i < (options.warmup ?? 2); i++) fn(prepare());
  const times: number[] = [];
  for (let i = 0; i < options.runs; i++) {
    const prepared = prepare();
    const start = cpuNs();
    fn(prepared);
    times.push((cpuNs() - start) / 1e6);
  }
  times.sort((a, b) => a - b);
  const at = (q: number) => percentile(times, q);
  return { runs: options.runs, medianMs: round(at(0.5), 2), p95Ms: round(at(0.95), 2), minMs: round(times[0] as number, 2) };
}

/** The q-quantile (0..1) of values sorted ascending: the sample at index floor(q * n), clamped. */
export function percentile(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

export function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** A seeded PRNG (mulberry32): benchmarks take their randomness from a seed so runs compare. */
export function seededRandom(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
