/**
 * Where a kube-apiserver's CPU goes while it opens storms of watches, for the storm rows of bench/proxy.ts: storms of
 * 2,000 watches, back to back for as long as the API server's CPU profile (`/debug/pprof/profile`) runs, sent
 * through kubectl proxy (one connection a watch, the bench's own `openManyWatches`) and straight from node:http2 (as the
 * proxies send them). Each profile is read with `go tool pprof` for the share of the x509 authenticator, which
 * verifies the client certificate on every request.
 *
 *   node dist/bench/probes/apiserver-profile.js [seconds per profile, default 25] [dir to keep the profiles]
 *
 * Prints per variant: storms, watches, the API server's CPU per watch, and the authenticator's share and µs per
 * watch. Needs `go` on the PATH (the tool builds use it) to read the profiles.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Agent, request } from 'undici';
import { freePort, resolveTool, startApiServer, startEtcd, type ApiServerHandle } from '../../src/dev/index.js';
import { waitForLine } from '../harness.js';
import { processCpuUs, untilQuiet } from '../bus.js';
import { MANY_WATCHES, openManyWatches } from '../proxy.js';
import { configMapsVersion, h2WatchStorm } from './h2-watches.js';

const AUTHENTICATOR = 'x509.(*Authenticator).AuthenticateRequest';
const seconds = Number(process.argv[2] ?? '25');
const keep = process.argv[3];
if (!Number.isInteger(seconds) || seconds < 5) {
  process.stderr.write('usage: apiserver-profile [seconds per profile, at least 5] [dir]\n');
  process.exit(2);
}
const run = promisify(execFile);
const progress = (message: string): void => void process.stderr.write(`apiserver-profile: ${message}\n`);

/** The total samples and the authenticator's cumulative seconds, from `go tool pprof -top -cum`. */
async function authenticatorShare(binary: string, profile: string): Promise<{ totalS: number; authS: number }> {
  const { stdout } = await run('go', ['tool', 'pprof', '-top', '-cum', '-nodecount=400', binary, profile], { maxBuffer: 16 * 1024 * 1024 });
  const total = /Total samples = ([\d.]+)(m?s)/u.exec(stdout);
  const line = stdout.split('\n').find((l) => l.includes(AUTHENTICATOR));
  const cum = line?.trim().split(/\s+/u)[3];
  const toS = (value: string, unit: string): number => Number(value) / (unit === 'ms' ? 1000 : 1);
  const authMatch = cum ? /^([\d.]+)(m?s)$/u.exec(cum) : null;
  return { totalS: total ? toS(total[1]!, total[2]!) : Number.NaN, authS: authMatch ? toS(authMatch[1]!, authMatch[2]!) : 0 };
}

async function profileWhile(server: ApiServerHandle, storm: () => Promise<() => void>): Promise<{ profile: Buffer; storms: number; cpuUs: number }> {
  const dispatcher = new Agent({ connect: { ca: server.caPem, cert: server.clientCertPem, key: server.clientKeyPem } });
  const cpu0 = await processCpuUs(server.pid());
  const taking = request(`${server.server}/debug/pprof/profile?seconds=${seconds}`, { dispatcher, headersTimeout: (seconds + 30) * 1000, bodyTimeout: 0 });
  let storms = 0;
  const end = Date.now() + (seconds - 1) * 1000;
  while (Date.now() < end) {
    const close = await storm();
    close();
    storms++;
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  const res = await taking;
  const profile = Buffer.from(await res.body.arrayBuffer());
  const cpuUs = (await processCpuUs(server.pid())) - cpu0;
  await dispatcher.close();
  return { profile, storms, cpuUs };
}

const dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-apiserver-profile-'));
progress('starting etcd, a kube-apiserver and kubectl proxy');
const etcd = await startEtcd({ dir: join(dir, 'etcd') });
const server = await startApiServer({ etcd, name: 'profile', dir: join(dir, 'api') });
const binary = (await resolveTool('kube-apiserver', { onProgress: progress })).path;
const kubectlPort = await freePort();
const kubectl = spawn((await resolveTool('kubectl', { onProgress: progress })).path, ['proxy', `--port=${kubectlPort}`, '--address=127.0.0.1', `--kubeconfig=${server.kubeconfigPath}`], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
try {
  await waitForLine(kubectl, /Starting to serve on/);
  const rv = await configMapsVersion(server);
  const path = `/api/v1/namespaces/default/configmaps?watch=true&allowWatchBookmarks=true&resourceVersion=${rv}`;
  const variants: [string, () => Promise<() => void>][] = [
    ['kubectl proxy', async () => {
      const opened = await openManyWatches(`http://127.0.0.1:${kubectlPort}`, path);
      return () => void opened.close();
    }],
    ['node:http2', () => h2WatchStorm(server, path, MANY_WATCHES)],
  ];
  for (const [name, storm] of variants) {
    progress(`${name}: storms of ${MANY_WATCHES} watches for ${seconds} s under the API server's CPU profile`);
    const { profile, storms, cpuUs } = await profileWhile(server, storm);
    const file = join(keep ?? dir, `${name.replace(/\W+/gu, '-')}.pprof`);
    await writeFile(file, profile);
    const { totalS, authS } = await authenticatorShare(binary, file);
    const watches = storms * MANY_WATCHES;
    console.log(
      `${name}: ${storms} storms, ${watches} watches; API server ${Math.round(cpuUs / watches)} µs a watch; ` +
        `client-certificate authentication ${((100 * authS) / totalS).toFixed(1)} % of its profile, ${Math.round((authS * 1e6) / watches)} µs a watch${keep ? ` (${file})` : ''}`,
    );
    await untilQuiet(server.pid());
  }
} finally {
  kubectl.kill();
  await server.stop();
  await etcd.stop();
  await rm(dir, { recursive: true, force: true });
}
