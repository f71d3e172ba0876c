import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Benchmark, BenchRow } from './harness.js';
import { currentLoad, gitCommit, machineFacts, runRecord, writeRunResults, type BenchmarkResult } from './results-file.js';

const here = dirname(fileURLToPath(import.meta.url));
// dist/bench/main.js -> <repo>
const repo = join(here, '..', '..');
const resultsDir = join(repo, 'bench', 'results');
// bus.js, propagation.js: rows that hub.js adds to its table; shard-selection.js: rows that proxy.js adds; the rest
// are helpers.
const NOT_BENCHMARKS = new Set(['main.js', 'harness.js', 'results-file.js', 'bus.js', 'propagation.js', 'shard-selection.js', 'bench-bed.js']);

function table(rows: BenchRow[]): string {
  const columns = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const cells = [columns, ...rows.map((r) => columns.map((c) => (r[c] === undefined ? '' : String(r[c]))))];
  const widths = columns.map((_, i) => Math.max(...cells.map((line) => (line[i] as string).length)));
  return cells.map((line) => line.map((cell, i) => cell.padEnd(widths[i] as number)).join('  ').trimEnd()).join('\n');
}

async function main(filter: string[]): Promise<void> {
  const files = readdirSync(here).filter((f) => f.endsWith('.js') && !NOT_BENCHMARKS.has(f)).sort();
  const modules = await Promise.all(files.map(async (f) => (await import(pathToFileURL(join(here, f)).href)) as { default: Benchmark }));
  const selected = modules.map((m) => m.default).filter((b) => filter.length === 0 || filter.includes(b.name));
  if (selected.length === 0) {
    process.stderr.write(`bench: no benchmark named ${filter.join(', ')}; there are: ${modules.map((m) => m.default.name).join(', ')}\n`);
    process.exitCode = 2;
    return;
  }
  // One file per run, written again as each benchmark ends, so a run that fails later keeps what it measured.
  const run = { started: new Date(), commit: gitCommit(repo), machine: machineFacts(), loadStart: currentLoad() };
  const results: BenchmarkResult[] = [];
  for (const bench of selected) {
    process.stderr.write(`bench: ${bench.name}: ${bench.description}\n`);
    const startedAt = new Date().toISOString();
    const rows = await bench.run({ progress: (message) => process.stderr.write(`bench: ${bench.name}: ${message}\n`) });
    results.push({ name: bench.name, description: bench.description, startedAt, rows });
    const record = runRecord({ started: run.started, commit: run.commit, machine: run.machine, load: { start: run.loadStart, end: currentLoad() }, results });
    const file = writeRunResults(resultsDir, record);
    console.log(`\n## ${bench.name} — ${bench.description}\n${table(rows)}\n(${file}; ${join(resultsDir, 'latest.md')})`);
  }
}

await main(process.argv.slice(2));
