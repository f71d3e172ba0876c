import type { HubStatus } from '../../hub/index.js';
import { CtrlmeshError, ErrorCodes } from '../../errors.js';
import { stringValue, type Command } from '../command.js';
import { readFlagFile } from './flags.js';

/** Left-aligned columns separated by two spaces, as kubectl prints them. */
export function renderTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]): string => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

/** Buckets as ranges: 0-7,9,12-15. */
export function bucketRanges(buckets: readonly number[]): string {
  const out: string[] = [];
  for (let i = 0; i < buckets.length; ) {
    let j = i;
    while (j + 1 < buckets.length && buckets[j + 1] === (buckets[j] as number) + 1) j++;
    out.push(i === j ? `${buckets[i]}` : `${buckets[i]}-${buckets[j]}`);
    i = j + 1;
  }
  return out.join(',') || '-';
}

export function renderStatus(status: HubStatus): string {
  const clusters = renderTable(
    ['CLUSTER', 'HEALTH', 'SERVER', 'LAST HEARTBEAT', 'LABELS'],
    status.clusters.map((c) => [c.name, c.health, c.server, c.lastHeartbeat ?? '-', Object.entries(c.labels).map(([k, v]) => `${k}=${v}`).join(',') || '-']),
  );
  const shards = renderTable(
    ['OPERATOR', 'SHARD', 'VERSION', 'ACKED', 'BUCKETS'],
    status.operators.flatMap((o) =>
      o.shards.map((s) => [
        o.operator,
        s.name,
        String(s.version),
        s.acknowledgedVersion === null ? '-' : String(s.acknowledgedVersion),
        Object.entries(s.buckets).map(([c, b]) => `${c}:${bucketRanges(b)}`).join(' ') || '-',
      ]),
    ),
  );
  const pending = status.operators.flatMap((o) => o.pending.map((p) => [o.operator, p.unit, p.from, p.to ?? '-', new Date(p.revokedAt).toISOString()]));
  const parts = [`hub ${status.identity} (${status.leader ? 'leader' : 'standby'})`, '', clusters];
  if (status.removedClusters.length) parts.push(`removed: ${status.removedClusters.join(', ')}`);
  parts.push('', shards);
  if (pending.length) parts.push('', renderTable(['OPERATOR', 'UNIT', 'FROM', 'TO', 'REVOKED AT'], pending));
  return `${parts.join('\n')}\n`;
}

export const statusCommand: Command = {
  name: 'status',
  summary: "Show the hub's clusters, their health, the shards and what each owns.",
  usage: '[--hub URL] [--token-file FILE] [--json]',
  details: [
    "The hub's chart serves /status on each pod's 127.0.0.1:9465 unless given a token: reach it with",
    '`kubectl -n ctrlmesh-system port-forward deploy/<release>-ctrlmesh-hub 9465`, then',
    '`ctrlmesh status --hub http://127.0.0.1:9465`.',
  ].join('\n'),
  options: {
    hub: { type: 'string', valueName: 'URL', description: 'hub status API (default http://127.0.0.1:9464)' },
    'token-file': { type: 'string', valueName: 'FILE', description: "bearer token of the hub's /status (its --status-token-file), first line" },
    json: { type: 'boolean', description: 'print the raw JSON' },
  },
  run: async (ctx) => {
    const base = typeof ctx.values.hub === 'string' ? ctx.values.hub : 'http://127.0.0.1:9464';
    const tokenFile = stringValue(ctx, 'token-file');
    const token = tokenFile === undefined ? undefined : readFlagFile('token-file', tokenFile).split('\n')[0]?.trim();
    const unreachable = (reason: string, cause?: unknown): CtrlmeshError =>
      new CtrlmeshError(ErrorCodes.HUB_UNREACHABLE, `cannot read the hub status at ${base}/status: ${reason} (is the hub running? see --hub)`, {
        cause,
      });
    let status: HubStatus;
    try {
      const res = await fetch(new URL('/status', base), { signal: AbortSignal.timeout(5_000), ...(token ? { headers: { authorization: `Bearer ${token}` } } : {}) });
      if (res.status === 401) {
        throw new CtrlmeshError(ErrorCodes.HUB_UNREACHABLE, `the hub at ${base}/status wants a bearer token: ${token ? 'the one in --token-file is not it' : 'give --token-file'}`);
      }
      if (!res.ok) throw unreachable(`HTTP ${res.status}`);
      status = (await res.json()) as HubStatus;
    } catch (err) {
      if (err instanceof CtrlmeshError) throw err;
      throw unreachable((err as Error).message, err);
    }
    ctx.stdout.write(ctx.values.json ? `${JSON.stringify(status, null, 2)}\n` : renderStatus(status));
    return 0;
  },
};
