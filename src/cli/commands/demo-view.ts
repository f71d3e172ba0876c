import { sumBy, type Sample } from '../../demo/index.js';
import type { HubStatus } from '../../hub/index.js';
import { renderStatus, renderTable } from './status.js';

/** One scrape of a shard proxy's /metrics (undefined samples: it did not answer). */
export interface ProxyScrape {
  shard: string;
  at: number;
  samples: Sample[] | undefined;
}

export interface DemoViewInput {
  title: string;
  clusters: readonly string[];
  /** The hub's /status, or undefined when it did not answer. */
  status: HubStatus | undefined;
  /** The latest scrape of each proxy, with the one before it for rates. */
  proxies: readonly { now: ProxyScrape; before: ProxyScrape | undefined }[];
}

const BREAKER = ['closed', 'half-open', 'open'];

function total(samples: readonly Sample[], name: string): number {
  return samples.filter((s) => s.name === name).reduce((sum, s) => sum + s.value, 0);
}

function proxyRow(clusters: readonly string[], now: ProxyScrape, before: ProxyScrape | undefined): string[] {
  if (!now.samples) return [now.shard, ...clusters.flatMap(() => ['-', 'unreachable']), '-', '-', '-'];
  const requests = sumBy(now.samples, 'ctrlmesh_proxy_requests_total', 'cluster');
  const earlier = before?.samples ? sumBy(before.samples, 'ctrlmesh_proxy_requests_total', 'cluster') : undefined;
  const seconds = before ? (now.at - before.at) / 1000 : 0;
  const breakers = sumBy(now.samples, 'ctrlmesh_proxy_breaker_state', 'cluster');
  const perCluster = clusters.flatMap((c) => {
    const rate = earlier && seconds > 0 ? Math.max(0, ((requests.get(c) ?? 0) - (earlier.get(c) ?? 0)) / seconds).toFixed(1) : '-';
    const breaker = breakers.has(c) ? (BREAKER[breakers.get(c) as number] ?? '?') : '-';
    return [rate, breaker];
  });
  return [
    now.shard,
    ...perCluster,
    String(total(now.samples, 'ctrlmesh_proxy_rate_limited_requests_total')),
    String(total(now.samples, 'ctrlmesh_proxy_faults_injected_total')),
    total(now.samples, 'ctrlmesh_proxy_fenced') > 0 ? 'FENCED' : String(total(now.samples, 'ctrlmesh_proxy_route_table_version')),
  ];
}

/** The demo's screen: the hub's clusters and shard ownership, then each shard proxy's traffic and protection. */
export function renderDemoView(input: DemoViewInput): string {
  const hub = input.status ? renderStatus(input.status) : 'hub: not answering\n';
  const header = ['SHARD', ...input.clusters.flatMap((c) => [`REQ/S ${c}`, `BREAKER ${c}`]), 'RATE-LIMITED', 'FAULTS', 'TABLE'];
  const proxies = renderTable(
    header,
    input.proxies.map((p) => proxyRow(input.clusters, p.now, p.before)),
  );
  return `${input.title}\n\n${hub}\n${proxies}\n`;
}
