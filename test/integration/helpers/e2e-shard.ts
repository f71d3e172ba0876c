import { spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { NatsEndpoint } from '../../../src/dev/index.js';
import { NatsRouteSource, operatorKubeconfig } from '../../../src/proxy/index.js';
import type { RouteTable } from '../../../src/transport/index.js';
import { proxyNatsConfig, routeSignerKey } from '../control-fixture.js';
import { settles, silent, startTestProxy, type TestProxy } from './proxy.js';
import { testbed } from './testbed.js';

/** One reconcile as the sample operator reports it with --timestamps. */
export interface ReconcileRecord {
  shard: string;
  cluster: string;
  /** `namespace/name` */
  key: string;
  started: number;
  finished: number;
  /** Whether it had to write (the object lacked this shard's stamp). */
  wrote: boolean;
}

const RECORD = /^reconciled (\S+) shard=(\S+) started=(\d+) finished=(\d+) wrote=(true|false) cluster=(\S+)$/;

/** One shard as deployed: a proxy following its route table over NATS and the sample operator (a child process) behind it. */
export interface E2eShard {
  name: string;
  proxy: TestProxy;
  operator: ChildProcess;
  /** The operator's pid when it started (a restart would change it). */
  pid: number;
  /** How many times the operator said it started. */
  starts: number;
  stop(): Promise<void>;
}

/**
 * Starts a shard's proxy (in process, route tables from NATS) and, once its first table names every cluster, the
 * sample operator through it on all of them. Every reconcile the operator reports is pushed onto `records`.
 * With `layout` (another shard's table of the same operator: same clusters, same home) the operator starts at once,
 * before the hub has published this shard: its informers retry until the proxy has a table.
 */
export async function startE2eShard(options: {
  nats: NatsEndpoint;
  operator: string;
  shard: string;
  clusters: string[];
  selector: string;
  dir: string;
  records: ReconcileRecord[];
  layout?: RouteTable;
}): Promise<E2eShard> {
  const { shard, clusters, records } = options;
  const nats = await proxyNatsConfig(options.nats, options.operator, shard);
  const trusted = [routeSignerKey(options.nats)];
  const proxy = await startTestProxy({
    table: undefined,
    credentialsPath: testbed().kubeconfigPath,
    dir: options.dir,
    source: () => new NatsRouteSource({ nats, trusted, operator: options.operator, shard, from: `${shard}-pod`, logger: silent, reackMs: 1_000 }),
  });
  let table = options.layout;
  if (table === undefined) {
    await settles(() => {
      table = proxy.proxy.controller.current?.table;
      if (!clusters.every((c) => table?.clusters.some((r) => r.name === c))) throw new Error(`shard ${shard} has no route table naming ${clusters.join(', ')} yet`);
    }, 30_000);
  }
  await writeFile(proxy.kubeconfigPath, operatorKubeconfig(table as RouteTable, proxy.proxy.apiUrl));
  const child = spawn(
    process.execPath,
    [join('dist', 'src', 'sample-operator', 'main.js'), '--kubeconfig', proxy.kubeconfigPath, '--shard', shard, '--contexts', clusters.join(','), '--selector', options.selector, '--timestamps'],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  );
  const started: E2eShard = {
    name: shard,
    proxy,
    operator: child,
    pid: child.pid as number,
    starts: 0,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      await proxy.close();
    },
  };
  let pending = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk;
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      if (line.startsWith('started ')) started.starts += 1;
      const m = RECORD.exec(line);
      if (m) records.push({ key: m[1]!, shard: m[2]!, started: Number(m[3]), finished: Number(m[4]), wrote: m[5] === 'true', cluster: m[6]! });
    }
  });
  return started;
}
