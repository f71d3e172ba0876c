import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { TestbedError } from '../errors.js';
import { freePort } from './free-port.js';
import { secureSetup, type NatsOptions, type NatsSecurity } from './nats.js';
import { httpOk } from './probes.js';
import { ServerProcess, serverControl, type ServerControl } from './server-process.js';
import { resolveTool } from './tools.js';

const CLUSTER_NAME = 'ctrlmesh-testbed';
const READY_TIMEOUT_MS = 30_000;
const POLL_MS = 200;
const MONITOR_TIMEOUT_MS = 1_000;

export interface NatsClusterOptions extends NatsOptions {
  /** How many nats-server processes; default 3 (the smallest cluster that survives losing one). */
  servers?: number;
}

/** One server of a cluster. Its pid and log are in `<cluster dir>/<name>`. */
export interface NatsServerHandle extends ServerControl {
  /** The server's `server_name`, as /jsz names the meta leader: ctrlmesh-testbed-1, -2, ... */
  name: string;
  url: string;
  monitorUrl: string;
  storeDir: string;
  /** SIGKILL, as a crash would end it; start() brings it back with its data. */
  kill(): Promise<void>;
  /** SIGSTOP: the process stays, its sockets stay open, and it answers nothing (a hung server); resolves once stopped. */
  freeze(): Promise<void>;
  /** SIGCONT after freeze(). */
  thaw(): void;
}

export interface NatsClusterHandle {
  /** The first server's client URL. */
  url: string;
  /** Every server's client URL, for clients' server lists. */
  urls: string[];
  /** The first server's monitoring endpoint. */
  monitorUrl: string;
  security?: NatsSecurity;
  servers: NatsServerHandle[];
  /** The server /jsz names as the JetStream meta leader, asking the servers that answer; undefined while none is elected. */
  metaLeader(): Promise<NatsServerHandle | undefined>;
  /**
   * Resolves once every running server answers, all agree on one meta leader and report the whole cluster, and
   * each one's /healthz (JetStream current) passes. Throws after `timeoutMs` (default 30 s).
   */
  ready(timeoutMs?: number): Promise<void>;
  /** Stops every server. */
  stop(): Promise<void>;
  /** Starts every server again (same ports, data, certificates) and waits until ready(). */
  start(signal?: AbortSignal): Promise<void>;
}

interface MetaCluster {
  leader?: string;
  cluster_size?: number;
}

/** /jsz of one server: its meta-group view, or undefined when it does not answer (stopped, frozen, starting). */
async function metaCluster(monitorUrl: string): Promise<MetaCluster | undefined> {
  try {
    const res = await fetch(`${monitorUrl}/jsz`, { signal: AbortSignal.timeout(MONITOR_TIMEOUT_MS) });
    if (!res.ok) return undefined;
    const body = (await res.json()) as { meta_cluster?: MetaCluster };
    return body.meta_cluster ?? {};
  } catch {
    return undefined;
  }
}

interface Member {
  name: string;
  port: number;
  monitorPort: number;
  clusterPort: number;
  dir: string;
}

/** One server's configuration: its own ports and store, routes to every other member, the shared TLS and auth. */
function memberConfig(member: Member, members: readonly Member[], secureLines: string[]): string {
  const routes = members.filter((m) => m !== member).map((m) => JSON.stringify(`nats-route://127.0.0.1:${m.clusterPort}`));
  return [
    `server_name: ${member.name}`,
    `listen: 127.0.0.1:${member.port}`,
    `http: 127.0.0.1:${member.monitorPort}`,
    `jetstream { store_dir: ${JSON.stringify(join(member.dir, 'jetstream'))} }`,
    // Routes stay plain TCP on loopback: clients get TLS and JWT auth, the servers' own links need neither here.
    `cluster { name: ${CLUSTER_NAME}, listen: 127.0.0.1:${member.clusterPort}, routes: [${routes.join(', ')}] }`,
    ...secureLines,
    '',
  ].join('\n');
}

/**
 * A NATS cluster with JetStream on 127.0.0.1: `servers` nats-server processes, each with its own client, monitor
 * and cluster port and store, all with the same TLS certificate and auth (secure) or none (open). `dir` holds
 * the shared CA and auth; each server's config, store, log and pid file are in `dir/<server name>`. Ready once
 * every server runs JetStream and a meta leader is elected.
 */
export async function startNatsCluster(options: NatsClusterOptions): Promise<NatsClusterHandle> {
  const count = options.servers ?? 3;
  if (!Number.isInteger(count) || count < 1) throw new TestbedError(`a NATS cluster needs at least one server, not ${count}`);
  const binary = options.binary ?? (await resolveTool('nats-server', options)).path;
  await mkdir(options.dir, { recursive: true });
  const secure = (options.security ?? 'secure') === 'secure' ? await secureSetup(options.dir) : undefined;
  const members: Member[] = [];
  for (let i = 1; i <= count; i++) {
    const name = `${CLUSTER_NAME}-${i}`;
    members.push({ name, port: await freePort(), monitorPort: await freePort(), clusterPort: await freePort(), dir: join(options.dir, name) });
  }
  const scheme = secure ? 'tls' : 'nats';
  const servers = await Promise.all(
    members.map(async (member): Promise<NatsServerHandle> => {
      await mkdir(member.dir, { recursive: true });
      const configFile = join(member.dir, 'nats.conf');
      await writeFile(configFile, memberConfig(member, members, secure?.lines(member.dir) ?? []));
      const monitorUrl = `http://127.0.0.1:${member.monitorPort}`;
      const server = new ServerProcess({
        name: `nats-server ${member.name}`,
        binary,
        dir: member.dir,
        logFileName: 'nats-server.log',
        args: ['-c', configFile],
        // Each server alone: JetStream runs. The cluster as a whole is judged by ready().
        probe: () => httpOk(`${monitorUrl}/healthz?js-enabled-only=true`),
        readyTimeoutMs: READY_TIMEOUT_MS,
        stopTimeoutMs: 10_000,
        logger: options.logger,
      });
      return {
        name: member.name,
        url: `${scheme}://127.0.0.1:${member.port}`,
        monitorUrl,
        storeDir: join(member.dir, 'jetstream'),
        ...serverControl(server),
        kill: () => server.kill(),
        freeze: async () => {
          server.signal('SIGSTOP');
          await stopped(server.pid);
        },
        thaw: () => server.signal('SIGCONT'),
      };
    }),
  );

  const metaLeader = async (): Promise<NatsServerHandle | undefined> => {
    const views = await Promise.all(servers.filter((s) => s.pid() !== undefined).map((s) => metaCluster(s.monitorUrl)));
    // The name most servers give: one just cut off may still name the leader it lost.
    const votes = new Map<string, number>();
    for (const leader of views.map((v) => v?.leader)) if (leader) votes.set(leader, (votes.get(leader) ?? 0) + 1);
    const [leader] = [...votes].sort((a, b) => b[1] - a[1])[0] ?? [];
    return servers.find((s) => s.name === leader && s.pid() !== undefined);
  };

  const settled = async (): Promise<boolean> => {
    const running = servers.filter((s) => s.pid() !== undefined);
    if (running.length === 0) return false;
    const views = await Promise.all(running.map((s) => metaCluster(s.monitorUrl)));
    const leaders = new Set(views.map((v) => v?.leader));
    if (leaders.size !== 1 || !views[0]?.leader || views.some((v) => v?.cluster_size !== count)) return false;
    const healthy = await Promise.all(running.map((s) => httpOk(`${s.monitorUrl}/healthz`, undefined, MONITOR_TIMEOUT_MS).catch(() => false)));
    return healthy.every(Boolean);
  };

  const ready = async (timeoutMs = READY_TIMEOUT_MS): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    while (!(await settled())) {
      if (Date.now() > deadline) {
        throw new TestbedError(
          `NATS cluster ${CLUSTER_NAME} elected no JetStream meta leader of all ${count} servers within ${timeoutMs / 1000} s; logs in ${options.dir}/*/nats-server.log`,
        );
      }
      await sleep(POLL_MS);
    }
  };

  const stop = async (): Promise<void> => {
    await Promise.all(servers.map((s) => s.stop()));
  };
  const start = async (signal?: AbortSignal): Promise<void> => {
    // Each server waits for its routes only in ready(): started one by one, the first would wait for the others.
    const results = await Promise.allSettled(servers.map((s) => s.start(signal)));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) {
      await stop();
      throw failed.reason;
    }
    try {
      await ready();
    } catch (err) {
      await stop();
      throw err;
    }
  };

  await start(options.signal);
  const first = servers[0] as NatsServerHandle;
  return {
    url: first.url,
    urls: servers.map((s) => s.url),
    monitorUrl: first.monitorUrl,
    ...(secure ? { security: secure.security } : {}),
    servers,
    metaLeader,
    ready,
    stop,
    start,
  };
}

/**
 * Resolves once the kernel reports the process stopped (state T in /proc/PID/stat): SIGSTOP takes effect
 * asynchronously, and a request sent in between would still be answered.
 */
async function stopped(pid: number | undefined): Promise<void> {
  if (pid === undefined) return;
  for (let i = 0; i < 200; i += 1) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    // The state follows the command name, which is in parentheses and may itself hold spaces.
    if (/\) [Tt] /.test(stat)) return;
    await sleep(10);
  }
  throw new TestbedError(`process ${pid} did not stop within 2 s of SIGSTOP`);
}
