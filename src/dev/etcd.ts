import { join } from 'node:path';
import { freePort } from './free-port.js';
import { httpOk } from './probes.js';
import { ServerProcess, serverControl, type ServerControl, type ServerStartOptions } from './server-process.js';
import { resolveTool } from './tools.js';

/** Its dir holds the data dir, the log and the pid file. */
export type EtcdOptions = ServerStartOptions;

export interface EtcdHandle extends ServerControl {
  /** Client URL, e.g. http://127.0.0.1:PORT, for --etcd-servers. */
  url: string;
  dir: string;
}

/** One single-member etcd on 127.0.0.1; several API servers share it through distinct --etcd-prefix values. */
export async function startEtcd(options: EtcdOptions): Promise<EtcdHandle> {
  const binary = options.binary ?? (await resolveTool('etcd', options)).path;
  const [clientPort, peerPort] = [await freePort(), await freePort()];
  const url = `http://127.0.0.1:${clientPort}`;
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  const server = new ServerProcess({
    name: 'etcd',
    binary,
    dir: options.dir,
    logFileName: 'etcd.log',
    args: [
      '--name=testbed',
      `--data-dir=${join(options.dir, 'data')}`,
      `--listen-client-urls=${url}`,
      `--advertise-client-urls=${url}`,
      `--listen-peer-urls=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      `--initial-cluster=testbed=${peerUrl}`,
      // A disposable test store: skipping fsync saves most of etcd's write latency.
      '--unsafe-no-fsync',
      '--log-level=warn',
    ],
    probe: () => httpOk(`${url}/health`, (body) => (JSON.parse(body) as { health?: string }).health === 'true'),
    readyTimeoutMs: 30_000,
    stopTimeoutMs: 10_000,
    logger: options.logger,
  });
  await server.start(options.signal);
  return {
    url,
    dir: options.dir,
    ...serverControl(server),
  };
}
