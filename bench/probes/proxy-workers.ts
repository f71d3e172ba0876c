/**
 * The multi-process proxy's upper bound, for bench/proxy.ts: N ctrlmesh proxies sharing one listening port through
 * node:cluster (the primary accepts and hands each connection to a worker in turn), each a whole proxy with its
 * own route table file source and store. No table is relayed or acknowledged between them, so this is what
 * spreading the request path over processes could give at best, before any coordination the one-owner rule needs.
 *
 *   BENCH_PROXY_WORKERS=<n> node dist/bench/probes/proxy-workers.js proxy <ctrlmesh proxy flags>
 *
 * Each worker prints `proxy listening on ...` itself. The primary stops its workers on SIGTERM.
 */
import cluster from 'node:cluster';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));
const workers = Number(process.env.BENCH_PROXY_WORKERS ?? '2');
const args = process.argv.slice(2);
const storeAt = args.indexOf('--store');

for (let i = 0; i < workers; i++) {
  // A store each: the workers would otherwise write one file at once.
  const own = args.map((arg, at) => (storeAt >= 0 && at === storeAt + 1 ? `${arg}.${i}` : arg));
  cluster.setupPrimary({ exec: CLI, args: own });
  cluster.fork();
}
process.on('SIGTERM', () => {
  for (const worker of Object.values(cluster.workers ?? {})) worker?.kill();
  process.exit(0);
});
