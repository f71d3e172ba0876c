import type { ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
/**
 * The benchmark harness API: a benchmark module (bench/<name>.ts) default-exports a {@link Benchmark}; main.ts runs
 * each one, prints its rows as a table and records them in the run's file in bench/results/ (bench/results-file.ts).
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

let gc: (() => void) | undefined;

/**
 * A full garbage collection now, untimed work of `prepare`: otherwise the garbage of building what a call consumes
 * (a fresh planner) is collected during the timed call, on this thread or V8's helpers, whose CPU counts too.
 */
export function collectGarbage(): void {
  if (gc === undefined) {
    // A context made after the flag is set has `gc`, however this process was started.
    setFlagsFromString('--expose-gc');
    gc = runInNewContext('gc') as () => void;
  }
  gc();
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

/** Resolves when the child's stdout has shown `pattern` (a server saying it listens); rejects if it exits first. */
export async function waitForLine(child: ChildProcess, pattern: RegExp): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = '';
    const onData = (chunk: Buffer): void => {
      seen += chunk.toString();
      if (!pattern.test(seen)) return;
      child.stdout?.off('data', onData);
      child.stdout?.resume();
      resolve();
    };
    child.stdout?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`process exited with ${code} before it was ready: ${seen}`)));
  });
}

/** The row that prints the machine's load beside a section's figures (1-minute load averages sampled during it). */
export function loadRow(label: string, loads: readonly number[]): BenchRow {
  const sorted = [...loads].sort((a, b) => a - b);
  return {
    case: `${label} (1-min load average)`,
    cores: availableParallelism(),
    loadMin: round(sorted[0] ?? 0, 2),
    loadMedian: round(percentile(sorted, 0.5), 2),
    loadMax: round(sorted[sorted.length - 1] ?? 0, 2),
  };
}


/** Rows as the aligned text table main.ts prints (for a module run on its own, e.g. `node dist/bench/propagation.js`). */
export function formatTable(rows: readonly BenchRow[]): string {
  const columns = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cells = [columns, ...rows.map((r) => columns.map((c) => (r[c] === undefined ? '' : String(r[c]))))];
  const widths = columns.map((_, i) => Math.max(...cells.map((line) => (line[i] as string).length)));
  return cells.map((line) => line.map((cell, i) => cell.padEnd(widths[i] as number)).join('  ').trimEnd()).join('\n');
}
