import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import type { BenchRow, Figure } from './harness.js';

/**
 * The record of one `npm run bench`: one JSON file per run in bench/results/, and bench/results/latest.md, the
 * latest figures against their targets, made again from every run file after each benchmark. Everything but the
 * last three functions is pure: the clock, the commit and the machine's facts come in as arguments.
 */

export interface MachineFacts {
  cpuModel: string;
  cpuCount: number;
  totalMemoryBytes: number;
  node: string;
  kernel: string;
}

/** The three load averages of os.loadavg(): 1, 5 and 15 minutes. */
export type LoadAverage = readonly [number, number, number];

export interface BenchmarkResult {
  name: string;
  description: string;
  /** ISO date the benchmark started. */
  startedAt: string;
  rows: readonly BenchRow[];
}

/** One figure as the run printed it: a cell of a benchmark's table, with what it is counted in and compared with. */
export interface RunFigure {
  benchmark: string;
  case: string;
  figure: string;
  value: Figure;
  /** `x` for a ratio, `ms`, `µs/request`, ...; null for text and flags. */
  unit: string | null;
  /** What a ratio or an added figure is taken against; null for an absolute figure. */
  peer: string | null;
}

export interface RunRecord {
  schema: 1;
  /** ISO date the run started. */
  date: string;
  /** `git rev-parse HEAD`, or "unknown". */
  commit: string;
  machine: MachineFacts;
  load: { start: LoadAverage; end: LoadAverage };
  benchmarks: { name: string; description: string; startedAt: string }[];
  figures: RunFigure[];
}

const PER_UNITS: Record<string, string> = { ns: 'ns', Us: 'µs', Ms: 'ms', KiB: 'KiB', MiB: 'MiB', Bytes: 'B', bytes: 'B' };

/** "WatchOpened" -> "watch opened". */
function words(camel: string): string {
  return camel.replace(/([a-z0-9])([A-Z])/gu, '$1 $2').toLowerCase();
}

/** The unit of a figure, read from its name as the benchmarks write them (`cpuUsPerRequest`, `p99Ms`, `vsDirect`). */
export function unitOf(figure: string, value: Figure): string | null {
  if (typeof value !== 'number') return null;
  if (peerOf(figure) !== null && !figure.startsWith('added')) return 'x';
  if (/Fraction$/u.test(figure)) return 'fraction';
  const per = /(ns|Us|Ms|KiB|MiB|Bytes|bytes)Per([A-Z][A-Za-z]*)$/u.exec(figure);
  if (per) return `${PER_UNITS[per[1] as string] as string}/${per[2] === 'MB' ? 'MB' : words(per[2] as string)}`;
  const rate = /^([a-z]+)PerSec$/u.exec(figure);
  if (rate) return `${rate[1] === 'req' ? 'requests' : ['open', 'secure', 'per'].includes(rate[1] as string) ? 'items' : rate[1]}/s`;
  if (/Ms(Max|Min)?$/u.test(figure)) return 'ms';
  if (/Us$/u.test(figure)) return 'µs';
  if (/KiB$/u.test(figure)) return 'KiB';
  if (/MiB$/u.test(figure)) return 'MiB';
  if (/MB$/u.test(figure)) return 'MB';
  if (/Bytes$/u.test(figure)) return 'B';
  if (figure === 'cpuPercentOfOneCore') return '% of one core';
  if (/^load(Min|Median|Max)$/u.test(figure)) return '1-min load average';
  if (figure === 'cores') return 'cores';
  return 'count';
}

const PEERS: readonly [RegExp, string][] = [
  [/VsKubectlProxy|^vsKubectlProxy/u, 'kubectl proxy'],
  [/VsDirect|^vsDirect|AsDirect$|^added/u, 'direct'],
  [/VsForwarder$/u, 'Node forwarder'],
  [/^threeOverOne/u, 'the 1-server side'],
  [/^secureOverOpen/u, 'open NATS'],
  [/OverMean$/u, 'the mean'],
  [/^movedOverFairShare$/u, 'fair share'],
  [/^movedOverRemovedLoad$/u, 'removed load'],
];

/** What a figure is taken against, read from its name; null when it stands alone. */
export function peerOf(figure: string): string | null {
  return PEERS.find(([pattern]) => pattern.test(figure))?.[1] ?? null;
}

/** Every cell of every row but `case`, in the order printed. */
export function figuresOf(results: readonly BenchmarkResult[]): RunFigure[] {
  return results.flatMap((result) =>
    result.rows.flatMap((row) =>
      Object.entries(row)
        .filter(([figure]) => figure !== 'case')
        .map(([figure, value]) => ({ benchmark: result.name, case: row.case, figure, value, unit: unitOf(figure, value), peer: peerOf(figure) })),
    ),
  );
}

export function runRecord(input: {
  started: Date;
  commit: string;
  machine: MachineFacts;
  load: { start: LoadAverage; end: LoadAverage };
  results: readonly BenchmarkResult[];
}): RunRecord {
  return {
    schema: 1,
    date: input.started.toISOString(),
    commit: input.commit,
    machine: input.machine,
    load: input.load,
    benchmarks: input.results.map(({ name, description, startedAt }) => ({ name, description, startedAt })),
    figures: figuresOf(input.results),
  };
}

/** `run-2026-11-28T09-14-03Z-2b5c177.json`: sorted by name, runs are sorted by date. */
export function runFileName(record: Pick<RunRecord, 'date' | 'commit'>): string {
  const stamp = record.date.replace(/\.\d+Z$/u, 'Z').replace(/:/gu, '-');
  return `run-${stamp}-${record.commit === 'unknown' ? 'unknown' : record.commit.slice(0, 7)}.json`;
}

/** A figure latest.md shows: where to find it in a run, and its target where the docs state one. */
export interface Headline {
  label: string;
  benchmark: string;
  case: string | RegExp;
  figure: string;
  /** Several rows match: show the largest (e.g. the slowest change of a planner). */
  largest?: boolean;
  target?: { text: string; met: (value: number) => boolean };
}

const atMost = (limit: number, unit: string): Headline['target'] => ({ text: `<= ${limit}${unit}`, met: (v) => v <= limit });
const atLeast = (limit: number, unit: string): Headline['target'] => ({ text: `>= ${limit}${unit}`, met: (v) => v >= limit });
const under = (limit: number, unit: string): Headline['target'] => ({ text: `< ${limit}${unit}`, met: (v) => v < limit });
const none: Headline['target'] = { text: '0', met: (v) => v === 0 };

/** The targets are those of docs/proxy.md and docs/control-plane.md ("Figures"); a figure without one shows "—". */
export const HEADLINES: readonly Headline[] = [
  { label: 'CPU per GET, ctrlmesh', benchmark: 'proxy', case: 'GET ctrlmesh proxy', figure: 'cpuVsKubectlProxy', target: atMost(1.2, 'x') },
  { label: 'GET throughput, ctrlmesh', benchmark: 'proxy', case: 'GET ctrlmesh proxy', figure: 'vsKubectlProxy', target: atLeast(1, 'x') },
  { label: 'GET throughput, the logic-free forwarder', benchmark: 'proxy', case: 'GET Node forwarder', figure: 'vsKubectlProxy' },
  { label: 'CPU per LIST of 100, ctrlmesh', benchmark: 'proxy', case: 'LIST ctrlmesh proxy', figure: 'cpuVsKubectlProxy', target: atMost(1.2, 'x') },
  { label: 'LIST of 100 throughput, ctrlmesh', benchmark: 'proxy', case: 'LIST ctrlmesh proxy', figure: 'vsKubectlProxy', target: atLeast(1, 'x') },
  { label: 'CPU per LIST of 5,000, plain client', benchmark: 'proxy', case: /^LIST \d+ ctrlmesh proxy$/u, figure: 'cpuVsKubectlProxy', target: atMost(1.5, 'x') },
  {
    label: 'CPU per LIST of 5,000, client asks for gzip',
    benchmark: 'proxy',
    case: /^LIST \d+ \(client asks for gzip\) ctrlmesh proxy$/u,
    figure: 'cpuVsKubectlProxy',
    target: atMost(1.5, 'x'),
  },
  { label: 'CPU per watch event, ctrlmesh', benchmark: 'proxy', case: 'watch events ctrlmesh proxy', figure: 'cpuPerEventVsKubectlProxy', target: atMost(2, 'x') },
  { label: '2,000 watches opened at once, time, ctrlmesh', benchmark: 'proxy', case: /^\d+ watches opened at once, ctrlmesh proxy$/u, figure: 'openVsKubectlProxy', target: atMost(1, 'x') },
  {
    label: '2,000 watches opened at once, time, the floor',
    benchmark: 'proxy',
    case: /^\d+ watches opened at once, Node forwarder, watches as HTTP\/2 streams$/u,
    figure: 'openVsKubectlProxy',
  },
  { label: '2,000 watches opened at once, failed, ctrlmesh', benchmark: 'proxy', case: /^\d+ watches opened at once, ctrlmesh proxy$/u, figure: 'failed', target: none },
  { label: 'CPU per watch opened, ctrlmesh', benchmark: 'proxy', case: /^\d+ watches opened at once, ctrlmesh proxy$/u, figure: 'cpuUsPerWatchOpened' },
  {
    label: 'CPU per watch opened, the floor',
    benchmark: 'proxy',
    case: /^\d+ watches opened at once, Node forwarder, watches as HTTP\/2 streams$/u,
    figure: 'cpuUsPerWatchOpened',
  },
  { label: 'CPU per watch opened, kubectl proxy', benchmark: 'proxy', case: /^\d+ watches opened at once, kubectl proxy$/u, figure: 'cpuUsPerWatchOpened' },
  { label: 'RSS per open watch, ctrlmesh', benchmark: 'proxy', case: /^\d+ watches opened at once, ctrlmesh proxy$/u, figure: 'vmRssVsForwarder', target: atMost(1, 'x') },
  {
    label: 'ShardingConfig change -> table in KV, p99',
    benchmark: 'hub',
    case: /^config change -> route table in KV \(debounce \d+ ms in agent and hub, the default; changes /u,
    figure: 'p99Ms',
    target: under(100, ' ms'),
  },
  {
    label: 'route change -> 50 proxies applied, p99, 1 server',
    benchmark: 'hub',
    case: /^route change -> every proxy applied, 1 server, 50 proxies, debounce \d+ ms \(default\), changes /u,
    figure: 'p99Ms',
    target: under(100, ' ms'),
  },
  {
    label: 'route change -> 50 proxies applied, p99, 3-server cluster',
    benchmark: 'hub',
    case: /^route change -> every proxy applied, 3-server cluster, 50 proxies, debounce \d+ ms \(default\), changes /u,
    figure: 'p99Ms',
  },
  { label: 'hub leader crash -> standby leads, p50', benchmark: 'hub', case: /^hub leader crash -> standby leads/u, figure: 'p50Ms' },
  { label: 'hub process with 500 clusters, CPU', benchmark: 'hub', case: /^hub process, /u, figure: 'cpuPercentOfOneCore' },
  { label: 'cold plan 1,000 x 32 x 200, median', benchmark: 'planner', case: 'from scratch', figure: 'medianMs', target: under(50, ' ms') },
  {
    label: 'incremental change, long-lived planner, p95 (slowest change)',
    benchmark: 'planner',
    case: /^incremental, long-lived planner: /u,
    figure: 'p95Ms',
    largest: true,
    target: under(5, ' ms'),
  },
];

function matches(headline: Headline, f: RunFigure): boolean {
  if (f.benchmark !== headline.benchmark || f.figure !== headline.figure || typeof f.value !== 'number') return false;
  return typeof headline.case === 'string' ? f.case === headline.case : headline.case.test(f.case);
}

const isLoadRow = (f: RunFigure): boolean => f.case.endsWith('(1-min load average)');

/** The load beside a figure: its section's load row (the first after it), else the run's 1-min load at start and end. */
function loadBeside(record: RunRecord, figure: RunFigure): string {
  const after = record.figures.slice(record.figures.indexOf(figure));
  const row = after.find((f) => f.benchmark === figure.benchmark && isLoadRow(f) && f.figure === 'loadMin');
  const max = row && after.find((f) => f.case === row.case && f.figure === 'loadMax');
  if (row && max) return `${String(row.value)}-${String(max.value)}`;
  return `${record.load.start[0].toFixed(2)} at start, ${record.load.end[0].toFixed(2)} at end`;
}

function show(value: number, unit: string | null): string {
  if (unit === 'x') return `${value}x`;
  if (unit === null || unit === 'count') return String(value);
  return `${value} ${unit}`;
}

/** latest.md: each headline from the newest run that measured it, against its target. */
export function latestMarkdown(records: readonly RunRecord[]): string {
  const newestFirst = [...records].sort((a, b) => b.date.localeCompare(a.date));
  const lines = [
    '# Latest bench figures',
    '',
    'Made by `npm run bench` from the run files in this folder (`run-*.json`) after each benchmark; do not edit it.',
    "Each figure is the newest run's that measured it. Ratios are against the peer named, taken within each round,",
    'then the median over rounds; the load is the 1-minute load average over the section. Targets are those of',
    'docs/proxy.md and docs/control-plane.md; "—" where none is stated. How to read the figures: bench/README.md.',
    '',
    '| figure | value | peer | target | met | load | run |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const headline of HEADLINES) {
    let found: { record: RunRecord; figure: RunFigure } | undefined;
    for (const record of newestFirst) {
      const candidates = record.figures.filter((f) => matches(headline, f));
      if (candidates.length === 0) continue;
      const figure = headline.largest ? candidates.reduce((a, b) => ((b.value as number) > (a.value as number) ? b : a)) : (candidates[0] as RunFigure);
      found = { record, figure };
      break;
    }
    if (found === undefined) {
      lines.push(`| ${headline.label} | not measured | — | ${headline.target?.text ?? '—'} | — | — | — |`);
      continue;
    }
    const { record, figure } = found;
    const value = figure.value as number;
    const met = headline.target === undefined ? '—' : headline.target.met(value) ? 'yes' : '**no**';
    const run = `${record.date.slice(0, 10)}, ${record.commit === 'unknown' ? 'unknown' : record.commit.slice(0, 7)}`;
    lines.push(
      `| ${headline.label} | ${show(value, figure.unit)} | ${figure.peer ?? '—'} | ${headline.target?.text ?? '—'} | ${met} | ${loadBeside(record, figure)} | ${run} |`,
    );
  }
  return `${lines.join('\n')}\n`;
}

/** The machine's facts, as a run file records them. */
export function machineFacts(): MachineFacts {
  const all = cpus();
  return { cpuModel: all[0]?.model.trim() ?? 'unknown', cpuCount: all.length, totalMemoryBytes: totalmem(), node: process.version, kernel: release() };
}

export function currentLoad(): LoadAverage {
  const [one, five, fifteen] = loadavg();
  return [one ?? 0, five ?? 0, fifteen ?? 0];
}

/** `git rev-parse HEAD` in `dir`, or "unknown" (no git, not a checkout). */
export function gitCommit(dir: string): string {
  try {
    return execFileSync('git', ['rev-parse', 'HEAD'], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() || 'unknown';
  } catch {
    return 'unknown';
  }
}

/** Writes the run's file (again, as benchmarks finish) and latest.md from every run file in `dir`. Returns the file. */
export function writeRunResults(dir: string, record: RunRecord): string {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, runFileName(record));
  writeFileSync(file, `${JSON.stringify(record, null, 2)}\n`);
  const records = readdirSync(dir)
    .filter((name) => /^run-.*\.json$/u.test(name))
    .flatMap((name) => {
      try {
        const parsed = JSON.parse(readFileSync(join(dir, name), 'utf8')) as RunRecord;
        return parsed.schema === 1 && Array.isArray(parsed.figures) ? [parsed] : [];
      } catch {
        return [];
      }
    });
  writeFileSync(join(dir, 'latest.md'), latestMarkdown(records));
  return file;
}
