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

// `cluster=` only when the operator works on several clusters (contexts); with one it is that one.
const RECORD = /^reconciled (\S+) shard=(\S+) started=(\d+) finished=(\d+) wrote=(true|false)(?: cluster=(\S+))?$/;

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

/** What every shard's proxy needs: where its tables come from and which clusters its first table must name. */
export interface ShardProxyOptions {
  nats: NatsEndpoint;
  operator: string;
  shard: string;
  clusters: string[];
  dir: string;
  /** Another shard's table of the same operator (same clusters, same home): the operator's kubeconfig at once. */
  layout?: RouteTable;
  /** The proxy's credentials (a kubeconfig with a context per cluster); the shared bed's admin by default. */
  credentialsPath?: string;
  /** The proxy's API port (default: a free one). */
  apiPort?: number;
}

/**
 * Starts a shard's proxy (in process, route tables from NATS) and writes the operator's kubeconfig: from `layout`
 * at once, or once the proxy's first table names every cluster.
 */
export async function startShardProxy(options: ShardProxyOptions): Promise<TestProxy> {
  const { shard, clusters } = options;
  const nats = await proxyNatsConfig(options.nats, options.operator, shard);
  const trusted = [routeSignerKey(options.nats)];
  const proxy = await startTestProxy({
    table: undefined,
    credentialsPath: options.credentialsPath ?? testbed().kubeconfigPath,
    dir: options.dir,
    ...(options.apiPort === undefined ? {} : { apiPort: options.apiPort }),
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
  return proxy;
}

/** Calls `onLine` with every complete line the stream gives. */
export function eachLine(stream: NodeJS.ReadableStream | null, onLine: (line: string) => void): void {
  let pending = '';
  stream?.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk;
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      onLine(line);
    }
  });
}

/** Ends the child (SIGTERM, awaited) and then the proxy. */
async function stopBoth(child: ChildProcess, proxy: TestProxy): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
  await proxy.close();
}

/**
 * Starts a shard's proxy (in process, route tables from NATS) and, once its first table names every cluster, the
 * sample operator through it on all of them. Every reconcile the operator reports is pushed onto `records`.
 * With `layout` (another shard's table of the same operator: same clusters, same home) the operator starts at once,
 * before the hub has published this shard: its informers retry until the proxy has a table.
 */
export async function startE2eShard(options: ShardProxyOptions & { selector: string; records: ReconcileRecord[] }): Promise<E2eShard> {
  const { shard, clusters, records } = options;
  const proxy = await startShardProxy(options);
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
    stop: () => stopBoth(child, proxy),
  };
  eachLine(child.stdout, (line) => {
    if (line.startsWith('started ')) started.starts += 1;
    const m = RECORD.exec(line);
    if (m) records.push({ key: m[1]!, shard: m[2]!, started: Number(m[3]), finished: Number(m[4]), wrote: m[5] === 'true', cluster: m[6] ?? (clusters[0] as string) });
  });
  return started;
}

/** One `"Successfully synced"` line of k8s.io/sample-controller, as this shard's process logged it. */
export interface SyncRecord {
  shard: string;
  /** `namespace/name` of the Foo. */
  key: string;
  /** When the line arrived (ms since the epoch). */
  at: number;
}

/** One shard of the upstream sample-controller: a proxy following its route table over NATS and the unmodified binary behind it. */
export interface SampleControllerShard {
  name: string;
  proxy: TestProxy;
  process: ChildProcess;
  /** Its klog output (stderr), kept for a failure's message. */
  log: string[];
  stop(): Promise<void>;
}

// klog's text form of `logger.Info("Successfully synced", "objectName", objectRef)`.
const SYNCED = /"Successfully synced" objectName="([^"]+)"/;

/**
 * Starts a shard's proxy and `binary` (k8s.io/sample-controller, unmodified) with `--kubeconfig` pointed at it. Every
 * Foo it syncs is pushed onto `records`.
 */
export async function startSampleControllerShard(options: ShardProxyOptions & { binary: string; records: SyncRecord[] }): Promise<SampleControllerShard> {
  const { shard, records } = options;
  const proxy = await startShardProxy(options);
  const child = spawn(options.binary, [`--kubeconfig=${proxy.kubeconfigPath}`], { stdio: ['ignore', 'ignore', 'pipe'] });
  const log: string[] = [];
  eachLine(child.stderr, (line) => {
    log.push(line);
    const m = SYNCED.exec(line);
    if (m) records.push({ shard, key: m[1]!, at: Date.now() });
  });
  return { name: shard, proxy, process: child, log, stop: () => stopBoth(child, proxy) };
}
