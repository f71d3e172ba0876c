/**
 * What the API server spends on a watch depending on how fast the watches reach it, for the storm rows of
 * bench/proxy.ts: the storm through a proxy lasts as long as the proxy takes to pass it on, and the API server's CPU
 * per watch was found to follow that time, not what the proxy sends. 2,000 watches of one namespace's ConfigMaps are
 * opened straight from node:http2 (100 streams a connection, as the proxies' watches go) to a fresh kube-apiserver:
 * all at once, all at once with a shard's label selector (the form ctrlmesh adds in the bench: one bucket), and
 * paced at 4 and 2 a millisecond (storms of about 0.5 and 1 s). The variants take turns within each round; the API
 * server is let go quiet between two storms.
 *
 *   node dist/bench/probes/watch-pace.js [rounds, default 8]
 *
 * Prints each storm, then per variant the API server's CPU µs per watch over the rounds, sorted, and the median.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { startApiServer, startEtcd } from '../../src/dev/index.js';
import { processCpuUs, untilQuiet } from '../bus.js';
import { configMapsVersion, h2WatchStorm } from './h2-watches.js';

const WATCHES = 2000;
const rounds = Number(process.argv[2] ?? '8');
if (!Number.isInteger(rounds) || rounds < 1) {
  process.stderr.write('usage: watch-pace [rounds]\n');
  process.exit(2);
}

interface Variant {
  name: string;
  /** Watches sent per millisecond; undefined = all at once. */
  perMs: number | undefined;
  selector: boolean;
}
const VARIANTS: readonly Variant[] = [
  { name: 'all at once', perMs: undefined, selector: false },
  { name: 'all at once, label selector', perMs: undefined, selector: true },
  { name: '4 a ms', perMs: 4, selector: false },
  { name: '2 a ms', perMs: 2, selector: false },
];

const dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-watch-pace-'));
const progress = (message: string): void => void process.stderr.write(`watch-pace: ${message}\n`);
progress('starting etcd and a kube-apiserver');
const etcd = await startEtcd({ dir: join(dir, 'etcd') });
const server = await startApiServer({ etcd, name: 'pace', dir: join(dir, 'api') });

async function storm(variant: Variant, rv: string): Promise<{ ms: number; apiUsPerWatch: number }> {
  const selector = variant.selector ? `&labelSelector=${encodeURIComponent('ctrlmesh.kusionstack.io/shard-hash=26')}` : '';
  const path = `/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}${selector}`;
  const pid = server.pid();
  const cpu0 = await processCpuUs(pid);
  const start = performance.now();
  const close = await h2WatchStorm(server, path, WATCHES, variant.perMs);
  const ms = performance.now() - start;
  const apiUsPerWatch = ((await processCpuUs(pid)) - cpu0) / WATCHES;
  close();
  await untilQuiet(pid);
  return { ms, apiUsPerWatch };
}

try {
  const rv = await configMapsVersion(server);
  const perVariant = VARIANTS.map(() => [] as number[]);
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < VARIANTS.length; k++) {
      const v = (r + k) % VARIANTS.length;
      const { ms, apiUsPerWatch } = await storm(VARIANTS[v]!, rv);
      perVariant[v]!.push(apiUsPerWatch);
      progress(`round ${r + 1}/${rounds}, ${VARIANTS[v]!.name}: ${Math.round(ms)} ms, API server ${Math.round(apiUsPerWatch)} µs a watch, load ${loadavg()[0]!.toFixed(2)}`);
    }
  }
  for (const [v, variant] of VARIANTS.entries()) {
    const sorted = perVariant[v]!.map(Math.round).sort((a, b) => a - b);
    console.log(`${variant.name}: API server µs per watch ${sorted.join(', ')}; median ${sorted[Math.floor(sorted.length / 2)]}`);
  }
} finally {
  await server.stop();
  await etcd.stop();
  await rm(dir, { recursive: true, force: true });
}
