import { describe, expect, it } from 'vitest';
import type { BenchRow } from '../../../bench/harness.js';
import { figuresOf, latestMarkdown, peerOf, runFileName, runRecord, unitOf, type MachineFacts, type RunRecord } from '../../../bench/results-file.js';

const MACHINE: MachineFacts = { cpuModel: 'Test CPU @ 2.0GHz', cpuCount: 2, totalMemoryBytes: 8 * 2 ** 30, node: 'v20.19.0', kernel: '6.1.0-test' };

const PROXY_ROWS: BenchRow[] = [
  { case: 'GET kubectl proxy', p99Ms: 1.2, cpuUsPerRequest: 244.8, vsKubectlProxy: 1 },
  { case: 'GET ctrlmesh proxy', p99Ms: 1.5, addedP99Ms: 0.3, reqPerSec: 3100, vsKubectlProxy: 1.01, cpuUsPerRequest: 198.2, cpuVsKubectlProxy: 0.81 },
  { case: 'GET and LIST 100: machine load (1-min load average)', cores: 2, loadMin: 0.6, loadMedian: 1.4, loadMax: 3.7 },
  { case: '2000 watches opened at once, ctrlmesh proxy', openVsKubectlProxy: 1.65, failed: 0, cpuUsPerWatchOpened: 289, vmRssVsForwarder: 0.32, failure: '' },
  { case: '2000 watches: machine load (1-min load average)', cores: 2, loadMin: 2.4, loadMedian: 2.9, loadMax: 3.4 },
];

function record(date: string, commit: string, rows: Record<string, BenchRow[]>, load: [number, number, number] = [1, 1, 1]): RunRecord {
  const results = Object.entries(rows).map(([name, r]) => ({ name, description: `the ${name} bench`, startedAt: date, rows: r }));
  return runRecord({ started: new Date(date), commit, machine: MACHINE, load: { start: load, end: [2, 2, 2] }, results });
}

describe('bench results file', () => {
  it('reads each figure\'s unit and peer from its name', () => {
    expect([unitOf('cpuUsPerRequest', 1), peerOf('cpuUsPerRequest')]).toEqual(['µs/request', null]);
    expect([unitOf('cpuUsPerWatchOpened', 1), unitOf('cpuMsPerMB', 1), unitOf('proxyReadBytesPerUpdate', 1)]).toEqual(['µs/watch opened', 'ms/MB', 'B/update']);
    expect([unitOf('cpuVsKubectlProxy', 1), peerOf('cpuVsKubectlProxy')]).toEqual(['x', 'kubectl proxy']);
    expect([unitOf('vsKubectlProxyMin', 1), peerOf('vsKubectlProxyMin')]).toEqual(['x', 'kubectl proxy']);
    expect([unitOf('vsDirect', 1), peerOf('vsDirect'), peerOf('vmRssVsForwarder'), peerOf('threeOverOneP99')]).toEqual(['x', 'direct', 'Node forwarder', 'the 1-server side']);
    expect([unitOf('addedP99Ms', 1), peerOf('addedP99Ms')]).toEqual(['ms', 'direct']);
    expect([unitOf('openAllMsMax', 1), unitOf('reqPerSec', 1), unitOf('eventsPerSec', 1), unitOf('nsPerOp', 1)]).toEqual(['ms', 'requests/s', 'events/s', 'ns/op']);
    expect([unitOf('rssMiB', 1), unitOf('loadMax', 1), unitOf('cpuPercentOfOneCore', 1), unitOf('failed', 0)]).toEqual(['MiB', '1-min load average', '% of one core', 'count']);
    expect([unitOf('failure', 'ECONNRESET'), unitOf('withinBound', true), unitOf('sameItemsAsDirect', true)]).toEqual([null, null, null]);
  });

  it('records the date, commit, machine, loads and every printed figure of a run', () => {
    const run = record('2026-11-28T09:14:03.512Z', '2b5c177aa0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5', { proxy: PROXY_ROWS }, [0.5, 0.7, 0.9]);
    expect(run).toMatchObject({
      schema: 1,
      date: '2026-11-28T09:14:03.512Z',
      commit: '2b5c177aa0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5',
      machine: MACHINE,
      load: { start: [0.5, 0.7, 0.9], end: [2, 2, 2] },
      benchmarks: [{ name: 'proxy', description: 'the proxy bench', startedAt: '2026-11-28T09:14:03.512Z' }],
    });
    const cells = PROXY_ROWS.reduce((n, row) => n + Object.keys(row).length - 1, 0);
    expect(run.figures).toHaveLength(cells);
    expect(run.figures).toContainEqual({ benchmark: 'proxy', case: 'GET ctrlmesh proxy', figure: 'cpuVsKubectlProxy', value: 0.81, unit: 'x', peer: 'kubectl proxy' });
    expect(run.figures).toContainEqual({ benchmark: 'proxy', case: '2000 watches opened at once, ctrlmesh proxy', figure: 'failure', value: '', unit: null, peer: null });
    expect(figuresOf([{ name: 'x', description: '', startedAt: '', rows: [{ case: 'only a name' }] }])).toEqual([]);
    expect(runFileName(run)).toBe('run-2026-11-28T09-14-03Z-2b5c177.json');
    expect(runFileName({ date: '2026-11-28T09:14:03.000Z', commit: 'unknown' })).toBe('run-2026-11-28T09-14-03Z-unknown.json');
  });

  it('shows each headline from the newest run that measured it, against its target, with its section\'s load', () => {
    const older = record('2026-11-27T10:00:00.000Z', 'aaaaaaa1111', {
      proxy: [{ case: 'GET ctrlmesh proxy', cpuVsKubectlProxy: 0.7, vsKubectlProxy: 0.9 }],
      planner: [
        { case: 'from scratch', medianMs: 15.5 },
        { case: 'incremental, long-lived planner: add a shard', p95Ms: 1.2 },
        { case: 'incremental, long-lived planner: remove a shard', p95Ms: 1.99 },
      ],
    });
    const newer = record('2026-11-28T09:14:03.000Z', 'bbbbbbb2222', { proxy: PROXY_ROWS }, [1.25, 1, 1]);
    const markdown = latestMarkdown([newer, older]);
    const line = (label: string): string => markdown.split('\n').find((l) => l.startsWith(`| ${label} |`)) ?? `no line for ${label}`;

    expect(line('CPU per GET, ctrlmesh')).toBe('| CPU per GET, ctrlmesh | 0.81x | kubectl proxy | <= 1.2x | yes | 0.6-3.7 | 2026-11-28, bbbbbbb |');
    expect(line('GET throughput, ctrlmesh')).toBe('| GET throughput, ctrlmesh | 1.01x | kubectl proxy | >= 1x | yes | 0.6-3.7 | 2026-11-28, bbbbbbb |');
    expect(line('2,000 watches opened at once, time, ctrlmesh')).toBe(
      '| 2,000 watches opened at once, time, ctrlmesh | 1.65x | kubectl proxy | <= 1x | **no** | 2.4-3.4 | 2026-11-28, bbbbbbb |',
    );
    expect(line('2,000 watches opened at once, failed, ctrlmesh')).toContain('| 0 | — | 0 | yes |');
    // No stated target: "—".
    expect(line('CPU per watch opened, ctrlmesh')).toBe('| CPU per watch opened, ctrlmesh | 289 µs/watch opened | — | — | — | 2.4-3.4 | 2026-11-28, bbbbbbb |');
    // Only the older run measured the planner; no load row there, so the run's own load at start and end.
    expect(line('cold plan 1,000 x 32 x 200, median')).toBe('| cold plan 1,000 x 32 x 200, median | 15.5 ms | — | < 50 ms | yes | 1.00 at start, 2.00 at end | 2026-11-27, aaaaaaa |');
    expect(line('incremental change, long-lived planner, p95 (slowest change)')).toContain('| 1.99 ms | — | < 5 ms | yes |');
    // Nothing measured it yet.
    expect(line('ShardingConfig change -> table in KV, p99')).toBe('| ShardingConfig change -> table in KV, p99 | not measured | — | < 100 ms | — | — | — |');
    expect(latestMarkdown([older, newer])).toBe(markdown);
  });
});
