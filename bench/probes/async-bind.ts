/**
 * What node:http2 pays per stream for Node 20's `AsyncResource#bind` (the deprecated accessor it defines on every
 * bound function), for src/runtime/async-bind.ts: storms of 2,000 watches opened straight from node:http2 (100 streams
 * a connection, as the proxy sends them) to a fresh kube-apiserver, with Node's own `bind` and with the lean one in
 * turns, in this one process.
 *
 *   node dist/bench/probes/async-bind.js [rounds, default 16]
 *
 * Prints this process's CPU µs per watch opened under each, sorted, and the medians.
 */
import { AsyncResource } from 'node:async_hooks';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startApiServer, startEtcd } from '../../src/dev/index.js';
import { useLeanAsyncBind } from '../../src/runtime/index.js';
import { untilQuiet } from '../bus.js';
import { configMapsVersion, h2WatchStorm } from './h2-watches.js';

const WATCHES = 2000;
const rounds = Number(process.argv[2] ?? '16');
if (!Number.isInteger(rounds) || rounds < 1) {
  process.stderr.write('usage: async-bind [rounds]\n');
  process.exit(2);
}

const binds = { node: AsyncResource.prototype.bind, lean: AsyncResource.prototype.bind };
useLeanAsyncBind();
binds.lean = AsyncResource.prototype.bind;

const dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-async-bind-'));
const progress = (message: string): void => void process.stderr.write(`async-bind: ${message}\n`);
progress('starting etcd and a kube-apiserver');
const etcd = await startEtcd({ dir: join(dir, 'etcd') });
const server = await startApiServer({ etcd, name: 'bind', dir: join(dir, 'api') });
try {
  const path = `/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion=${await configMapsVersion(server)}`;
  const cpu = { node: [] as number[], lean: [] as number[] };
  for (let r = 0; r < rounds; r++) {
    for (const kind of r % 2 === 0 ? (['lean', 'node'] as const) : (['node', 'lean'] as const)) {
      AsyncResource.prototype.bind = binds[kind];
      const start = process.cpuUsage();
      const close = await h2WatchStorm(server, path, WATCHES);
      const used = process.cpuUsage(start);
      cpu[kind].push((used.user + used.system) / WATCHES);
      close();
      await untilQuiet(server.pid());
      progress(`round ${r + 1}/${rounds}, ${kind} bind: ${Math.round(cpu[kind].at(-1)!)} µs a watch`);
    }
  }
  for (const kind of ['node', 'lean'] as const) {
    const sorted = cpu[kind].map(Math.round).sort((a, b) => a - b);
    console.log(`${kind} bind: CPU µs per watch opened ${sorted.join(', ')}; median ${sorted[Math.floor(sorted.length / 2)]}`);
  }
} finally {
  await server.stop();
  await etcd.stop();
  await rm(dir, { recursive: true, force: true });
}
