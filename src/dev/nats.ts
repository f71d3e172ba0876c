import { join } from 'node:path';
import { freePort } from './free-port.js';
import { httpOk } from './probes.js';
import { ServerProcess, serverControl, type ServerControl, type ServerStartOptions } from './server-process.js';
import { resolveTool } from './tools.js';

/** Its dir holds the JetStream store, the log and the pid file. */
export type NatsOptions = ServerStartOptions;

export interface NatsHandle extends ServerControl {
  /** Client URL, nats://127.0.0.1:PORT. */
  url: string;
  /** Monitoring endpoint (/healthz, /varz, /jsz), http://127.0.0.1:PORT. */
  monitorUrl: string;
  storeDir: string;
}

/** One nats-server with JetStream on 127.0.0.1; ready once /healthz reports JetStream enabled. */
export async function startNats(options: NatsOptions): Promise<NatsHandle> {
  const binary = options.binary ?? (await resolveTool('nats-server', options)).path;
  const [port, monitorPort] = [await freePort(), await freePort()];
  const storeDir = join(options.dir, 'jetstream');
  const monitorUrl = `http://127.0.0.1:${monitorPort}`;
  const server = new ServerProcess({
    name: 'nats-server',
    binary,
    dir: options.dir,
    logFileName: 'nats-server.log',
    args: ['-a', '127.0.0.1', '-p', String(port), '-m', String(monitorPort), '-js', '-sd', storeDir, '-n', 'ctrlmesh-testbed'],
    probe: () => httpOk(`${monitorUrl}/healthz?js-enabled-only=true`),
    readyTimeoutMs: 30_000,
    stopTimeoutMs: 10_000,
    logger: options.logger,
  });
  await server.start(options.signal);
  return {
    url: `nats://127.0.0.1:${port}`,
    monitorUrl,
    storeDir,
    ...serverControl(server),
  };
}
