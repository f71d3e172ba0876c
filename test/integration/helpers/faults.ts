import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, fetch as undiciFetch } from 'undici';
import { freePort } from '../../../src/dev/index.js';
import type { NatsClientConfig } from '../../../src/transport/index.js';
import { proxyCommandArgs } from '../../../src/transport/proxy-command.js';

/*
 * The fault harness: a TCP relay that can drop a link silently, a write prober that times every write each proxy
 * let through for one unit, a proxy run as a child process (so it can be paused), and the overlap measure.
 */

// ---------------------------------------------------------------------------------------------------------------
// TCP relay

/** One relayed connection: the client's socket and the upstream one. */
interface Pair {
  client: Socket;
  upstream: Socket | undefined;
}

export interface TcpRelayOptions {
  /** Where to forward: host and port of a NATS server. */
  target: { host: string; port: number };
}

/**
 * A TCP relay on 127.0.0.1 between a client and a server. `blackhole()` is a silent partition: bytes stop flowing
 * both ways, nothing is closed or reset, new connections are accepted and left hanging (a partition drops SYNs;
 * here they wait the same way). Bytes sent meanwhile stay in the kernel's buffers (reading is paused), as a
 * partitioned TCP peer keeps retransmitting them; `heal()` lets them through, and a side that closed meanwhile is
 * closed on the other side only then. TLS passes through untouched: the server's certificate (SAN 127.0.0.1)
 * still verifies.
 */
export class TcpRelay {
  private server: Server | undefined;
  private readonly pairs = new Set<Pair>();
  private holes = false;
  port = 0;

  constructor(private readonly options: TcpRelayOptions) {}

  get targetPort(): number {
    return this.options.target.port;
  }

  get blackholed(): boolean {
    return this.holes;
  }

  /** The relay's URL with the scheme of `like` (e.g. tls://127.0.0.1:PORT). */
  url(scheme = 'tls'): string {
    return `${scheme}://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const server = createServer({ pauseOnConnect: true }, (client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('relay: no port');
    this.port = address.port;
    this.server = server;
  }

  /** Stops forwarding in both directions, closing nothing. */
  blackhole(): void {
    this.holes = true;
    for (const pair of this.pairs) {
      pair.client.pause();
      pair.upstream?.pause();
    }
  }

  /** Forwards again: what was held is delivered, and hanging connections are connected upstream. */
  heal(): void {
    this.holes = false;
    for (const pair of this.pairs) {
      if (pair.upstream === undefined) this.connectUpstream(pair);
      else {
        pair.client.resume();
        pair.upstream.resume();
      }
    }
  }

  /** Ends every relayed connection (both sides) and stops listening. */
  async close(): Promise<void> {
    for (const pair of this.pairs) {
      pair.client.destroy();
      pair.upstream?.destroy();
    }
    this.pairs.clear();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Relayed connections open now. */
  get connections(): number {
    return this.pairs.size;
  }

  private accept(client: Socket): void {
    const pair: Pair = { client, upstream: undefined };
    this.pairs.add(pair);
    client.setNoDelay(true);
    client.on('error', () => undefined);
    client.on('close', () => {
      this.pairs.delete(pair);
      pair.upstream?.destroy();
    });
    if (!this.holes) this.connectUpstream(pair);
  }

  private connectUpstream(pair: Pair): void {
    const { client } = pair;
    const upstream = tcpConnect(this.options.target);
    pair.upstream = upstream;
    upstream.setNoDelay(true);
    upstream.on('error', () => undefined);
    upstream.on('close', () => {
      this.pairs.delete(pair);
      client.destroy();
    });
    // Data is written on by hand (not pipe()), so that pausing a side truly stops it.
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      client.write(chunk);
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
    upstream.once('connect', () => {
      if (this.holes) {
        client.pause();
        upstream.pause();
      } else client.resume();
    });
  }
}

/** A relay for each server URL (tls://host:port) of a NATS endpoint, in the same order. */
export async function relaysFor(urls: readonly string[]): Promise<TcpRelay[]> {
  const relays: TcpRelay[] = [];
  for (const url of urls) {
    const { hostname, port } = new URL(url);
    const relay = new TcpRelay({ target: { host: hostname, port: Number(port) } });
    await relay.start();
    relays.push(relay);
  }
  return relays;
}

/**
 * The port map that sends a proxy process's connections to each server through its relay (see
 * port-map-preload.mjs): a client keeps the servers' own URLs, and those it learns from the cluster are relayed too.
 */
export function relayPortMap(relays: readonly TcpRelay[]): Record<number, number> {
  return Object.fromEntries(relays.map((r) => [r.targetPort, r.port]));
}

// ---------------------------------------------------------------------------------------------------------------
// Write prober

/** One write sent through one proxy. */
export interface ProbeWrite {
  target: string;
  seq: number;
  /** Wall clock (ms, fractional) when it was sent and when its answer came. */
  sentAt: number;
  answeredAt: number;
  /** HTTP status; 0 when no answer came (transport error or timeout). */
  status: number;
  /** The object's resourceVersion after an accepted write: the API server's order of execution. */
  rv?: number;
}

export interface ProbeTarget {
  name: string;
  /** The proxy's API URL (plain http, home cluster). */
  apiUrl: string;
}

const clock = (): number => performance.timeOrigin + performance.now();

/**
 * Sends a merge PATCH of one ConfigMap's annotation (a new value each time, so each accepted write is a new
 * resourceVersion) through each target every `intervalMs`, without waiting for earlier answers (up to
 * `maxInflight` per target), and records every answer. Requests wait up to `timeoutMs` for their answer: a
 * paused proxy answers the writes it received only when it runs again, and those must be counted.
 */
export class WriteProber {
  readonly writes: ProbeWrite[] = [];
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly inflight = new Map<string, number>();
  private readonly pending = new Set<Promise<void>>();
  private readonly agent = new Agent({ connections: 256, headersTimeout: 0, bodyTimeout: 0, keepAliveTimeout: 1_000 });
  skipped = 0;
  private closed = false;
  private seq = 0;
  readonly startedAt = clock();

  constructor(
    private readonly options: {
      targets: ProbeTarget[];
      namespace: string;
      configMap: string;
      intervalMs?: number;
      maxInflight?: number;
      timeoutMs?: number;
    },
  ) {
    for (const target of options.targets) {
      this.inflight.set(target.name, 0);
      const timer = setInterval(() => this.send(target), options.intervalMs ?? 20);
      this.timers.push(timer);
    }
  }

  private send(target: ProbeTarget): void {
    const inflight = this.inflight.get(target.name) ?? 0;
    if (inflight >= (this.options.maxInflight ?? 64)) {
      this.skipped += 1;
      return;
    }
    this.inflight.set(target.name, inflight + 1);
    const seq = ++this.seq;
    const url = `${target.apiUrl}/api/v1/namespaces/${this.options.namespace}/configmaps/${this.options.configMap}`;
    const body = JSON.stringify({ metadata: { annotations: { 'ctrlmesh-fault-probe': `${target.name}-${seq}` } } });
    const sentAt = clock();
    const done = (async () => {
      let status = 0;
      let rv: number | undefined;
      try {
        const res = await undiciFetch(url, {
          method: 'PATCH',
          headers: { 'content-type': 'application/merge-patch+json' },
          body,
          signal: AbortSignal.timeout(this.options.timeoutMs ?? 60_000),
          dispatcher: this.agent,
        });
        status = res.status;
        const text = await res.text();
        if (res.ok) rv = Number((JSON.parse(text) as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion);
      } catch {
        status = 0;
      }
      this.writes.push({ target: target.name, seq, sentAt, answeredAt: clock(), status, ...(rv !== undefined ? { rv } : {}) });
      this.inflight.set(target.name, (this.inflight.get(target.name) ?? 1) - 1);
    })();
    this.pending.add(done);
    void done.finally(() => this.pending.delete(done));
  }

  /** The accepted (2xx) writes of one target so far. */
  accepted(target: string): ProbeWrite[] {
    return this.writes.filter((w) => w.target === target && w.status >= 200 && w.status < 300);
  }

  /** Stops sending and waits for every answer (or timeout). */
  async stop(): Promise<ProbeWrite[]> {
    for (const t of this.timers) clearInterval(t);
    await Promise.all([...this.pending]);
    if (!this.closed) {
      this.closed = true;
      await this.agent.close();
    }
    return this.writes;
  }
}

export interface Overlap {
  /**
   * 0 when every write the old owner let through was executed by the API server before every write the new owner
   * let through (resourceVersion order); otherwise the wall-clock span that contains both owners' interleaved
   * writes: from the send of the new owner's first accepted write to the answer of the old owner's last one.
   */
  overlapMs: number;
  /** Old owner's accepted writes executed after the new owner's first one. */
  interleaved: number;
  /** Accepted writes per side. */
  fromAccepted: number;
  toAccepted: number;
  /** How long the unit had no writer: from the old owner's last accepted answer to the new owner's first. */
  gapMs: number | null;
  /** The old owner's writes executed after the new owner's first, and that first write. */
  offending: ProbeWrite[];
  firstNew?: ProbeWrite;
}

/**
 * The overlap of a move of one unit from `from` to `to`, judged by the order in which the API server executed
 * the accepted writes (each accepted merge PATCH is a new resourceVersion of the one object).
 */
export function overlapOf(writes: readonly ProbeWrite[], from: string, to: string): Overlap {
  const ok = (w: ProbeWrite): boolean => w.status >= 200 && w.status < 300 && w.rv !== undefined;
  const a = writes.filter((w) => w.target === from && ok(w)).sort((x, y) => (x.rv as number) - (y.rv as number));
  const b = writes.filter((w) => w.target === to && ok(w)).sort((x, y) => (x.rv as number) - (y.rv as number));
  const lastA = a.at(-1);
  const firstB = b[0];
  if (!lastA || !firstB) return { overlapMs: 0, interleaved: 0, fromAccepted: a.length, toAccepted: b.length, gapMs: null, offending: [] };
  const offending = a.filter((w) => (w.rv as number) > (firstB.rv as number));
  const overlapMs = offending.length > 0 ? Math.max(1, Math.round(lastA.answeredAt - firstB.sentAt)) : 0;
  return {
    overlapMs,
    interleaved: offending.length,
    fromAccepted: a.length,
    toAccepted: b.length,
    gapMs: Math.round(firstB.answeredAt - lastA.answeredAt),
    offending,
    firstNew: firstB,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// A proxy as a child process

export interface ProxyProcessOptions {
  /** How the proxy reaches NATS (its shard's creds, TLS CA); servers may be relays. */
  nats: NatsClientConfig;
  routeSigner: string;
  operator: string;
  shard: string;
  /** Kubeconfig whose contexts are the cluster names (the bed's). */
  credentials: string;
  /** Holds the stored table and the proxy's log. */
  dir: string;
  leaseMarginMs?: number;
  logLevel?: string;
  /** Connections to these 127.0.0.1 ports go to the mapped ones (relays): see port-map-preload.mjs. */
  portMap?: Record<number, number>;
  /** Whether its wall clock can be stepped (stepClock): see clock-step-preload.mjs. */
  steppableClock?: boolean;
}

const PORT_MAP_PRELOAD = pathToFileURL(fileURLToPath(new URL('./port-map-preload.mjs', import.meta.url))).href;
const CLOCK_STEP_PRELOAD = pathToFileURL(fileURLToPath(new URL('./clock-step-preload.mjs', import.meta.url))).href;

/** `ctrlmesh proxy` (dist/) as a child process: pause it, continue it, kill it, restart it on the same ports. */
export class ProxyProcess {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private log: WriteStream | undefined;
  apiPort = 0;
  opsPort = 0;

  constructor(private readonly options: ProxyProcessOptions) {}

  get apiUrl(): string {
    return `http://127.0.0.1:${this.apiPort}`;
  }

  get opsUrl(): string {
    return `http://127.0.0.1:${this.opsPort}`;
  }

  get logFile(): string {
    return join(this.options.dir, 'proxy.log');
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Starts it (same ports and store as before when restarted) and waits until its ops port answers. */
  async start(nats: NatsClientConfig = this.options.nats, portMap: Record<number, number> | undefined = this.options.portMap): Promise<void> {
    const o = this.options;
    await mkdir(o.dir, { recursive: true });
    if (this.apiPort === 0) [this.apiPort, this.opsPort] = [await freePort(), await freePort()];
    const creds = nats.credentials?.kind === 'creds' ? nats.credentials.file : undefined;
    if (!creds || !nats.tls) throw new Error('the proxy process needs TLS and a creds file');
    const args = [
      ...(portMap ? ['--import', PORT_MAP_PRELOAD] : []),
      ...(o.steppableClock ? ['--import', CLOCK_STEP_PRELOAD] : []),
      join('dist', 'src', 'cli', 'main.js'),
      ...proxyCommandArgs({
        nats: nats.servers,
        natsCa: nats.tls.caFile,
        natsCreds: creds,
        routeSigners: [o.routeSigner],
        operator: o.operator,
        shard: o.shard,
        credentials: o.credentials,
        store: join(o.dir, 'store', 'table.json'),
        listen: `127.0.0.1:${this.apiPort}`,
        opsListen: `127.0.0.1:${this.opsPort}`,
        podName: `${o.shard.replace(/\W+/g, '-')}-pod`,
        leaseMarginMs: o.leaseMarginMs ?? 500,
      }),
      '--log-level',
      o.logLevel ?? process.env.CTRLMESH_FAULTS_PROXY_LOG ?? 'info',
    ];
    this.log = createWriteStream(this.logFile, { flags: 'a' });
    const log = this.log;
    const env = {
      ...process.env,
      ...(portMap ? { CTRLMESH_TEST_PORT_MAP: JSON.stringify(portMap) } : {}),
      ...(o.steppableClock ? { CTRLMESH_TEST_CLOCK_FILE: this.clockFile } : {}),
    };
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    child.stdout?.pipe(log, { end: false });
    child.stderr?.pipe(log, { end: false });
    this.child = child;
    this.exited = new Promise<void>((resolve) => child.once('exit', () => resolve())).then(() => {
      if (this.child === child) this.child = undefined;
    });
    const deadline = Date.now() + 20_000;
    for (;;) {
      if (this.child !== child) throw new Error(`proxy ${o.shard} exited at start; see ${this.logFile}`);
      const res = await fetch(`${this.opsUrl}/healthz`, { signal: AbortSignal.timeout(1_000) }).catch(() => undefined);
      if (res) {
        await res.body?.cancel();
        return;
      }
      if (Date.now() > deadline) throw new Error(`proxy ${o.shard} did not answer on ${this.opsUrl}; see ${this.logFile}`);
      await sleep(100);
    }
  }

  /** SIGSTOP: its sockets stay open, the kernel still accepts connections, nothing is answered. */
  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  resume(): void {
    this.child?.kill('SIGCONT');
  }

  /**
   * Steps its wall clock by `ms` (the monotonic one runs on), as NTP or a VM resume would; needs `steppableClock`.
   * Its log lines' times step with it.
   */
  async stepClock(ms: number): Promise<void> {
    if (!this.options.steppableClock) throw new Error('started without a steppable clock');
    this.clockOffsetMs += ms;
    await writeFile(this.clockFile, String(this.clockOffsetMs));
    this.child?.kill('SIGUSR2');
  }

  /** How far its wall clock is from the real one (ms). */
  clockOffsetMs = 0;

  private get clockFile(): string {
    return join(this.options.dir, 'clock-offset-ms');
  }

  /** SIGKILL, as a crash (or the OOM killer) ends it. */
  async kill(): Promise<void> {
    this.child?.kill('SIGKILL');
    await this.exited;
    await new Promise<void>((resolve) => (this.log ? this.log.end(() => resolve()) : resolve()));
    this.log = undefined;
  }

  /** SIGTERM (after SIGCONT), SIGKILL after 10 s. */
  async stop(): Promise<void> {
    const child = this.child;
    if (child) {
      child.kill('SIGCONT');
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await this.exited;
      clearTimeout(timer);
    }
    await new Promise<void>((resolve) => (this.log ? this.log.end(() => resolve()) : resolve()));
    this.log = undefined;
  }

  /** Times (ms) of the log lines whose message starts with `prefix`, at or after `since`. */
  async logTimes(prefix: string, since = 0): Promise<number[]> {
    const text = await readFile(this.logFile, 'utf8').catch(() => '');
    const times: number[] = [];
    for (const line of text.split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const entry = JSON.parse(line) as { time?: number; msg?: string };
        if (typeof entry.time === 'number' && entry.time >= since && entry.msg?.startsWith(prefix)) times.push(entry.time);
      } catch {
        // not a log line
      }
    }
    return times;
  }

  /** /readyz: 200 and serving, or 503 and why not (unreachable: status 0). */
  async readyz(): Promise<{ status: number; text: string }> {
    try {
      const res = await fetch(`${this.opsUrl}/readyz`, { signal: AbortSignal.timeout(1_000) });
      return { status: res.status, text: await res.text() };
    } catch (err) {
      return { status: 0, text: (err as Error).message };
    }
  }

  /** The version of the table it has applied (its metric), or undefined when unreachable or none. */
  async tableVersion(): Promise<number | undefined> {
    try {
      const res = await fetch(`${this.opsUrl}/metrics`, { signal: AbortSignal.timeout(1_000) });
      const m = /^ctrlmesh_proxy_route_table_version(?:\{[^}]*\})? (\S+)$/m.exec(await res.text());
      const v = m ? Number(m[1]) : NaN;
      return Number.isFinite(v) && v > 0 ? v : undefined;
    } catch {
      return undefined;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Results

export interface FaultResult {
  case: string;
  overlapMs: number;
  /** From healing / continuing / restarting until every proxy serves its current table (/readyz 200); null when nothing was healed. */
  recoverMs: number | null;
  /** Since the fault began (ms): the hub revoked the unit, the old owner's proxy fenced itself (its log), the hub granted the unit. */
  revokeMs: number | null;
  fenceMs: number | null;
  grantMs: number | null;
  interleaved: number;
  /** Accepted writes through the old and the new owner. */
  oldOwnerWrites: number;
  newOwnerWrites: number;
  /** Time the unit had no writer (old owner's last accepted answer to the new owner's first). */
  gapMs: number | null;
  grantedBy: string;
  note: string;
}

/** Prints the table and one JSON line (for the issue note). */
export function printResults(results: readonly FaultResult[]): void {
  if (results.length === 0) return;
  console.table(results.map((r) => ({ ...r })));
  console.log(`FAULT-RESULTS ${JSON.stringify(results)}`);
}

export { clock };
