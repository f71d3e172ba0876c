import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { mkdir, readFile, realpath } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { TestbedError } from '../errors.js';
import { removePidFile, writePidFile } from './pid-file.js';
import type { ToolOptions } from './tools.js';

const LOG_TAIL_LINES = 25;

/** What starting any test server takes. */
export interface ServerStartOptions extends ToolOptions {
  /** Holds the server's data, log and pid file. */
  dir: string;
  /** The server's binary; resolved (and built once) when absent. */
  binary?: string;
  logger?: Logger;
  /** Aborting it stops a start in progress. */
  signal?: AbortSignal;
}
const PROBE_INTERVAL_MS = 250;

export interface ServerProcessOptions {
  /** Names the server in errors and logs, e.g. `kube-apiserver cluster-a`. */
  name: string;
  binary: string;
  args: string[];
  /** Holds the server's log file and its pid file. */
  dir: string;
  logFileName: string;
  /** One readiness probe: resolves true when the server is ready. Errors count as not ready yet. */
  probe: () => Promise<boolean>;
  readyTimeoutMs: number;
  /** How long a SIGTERM gets before SIGKILL. */
  stopTimeoutMs: number;
  logger?: Logger;
}

/**
 * One server process of the test bed. Started through `setpriv --pdeathsig KILL`, so the kernel kills it when its
 * parent dies, even by SIGKILL; its pid is recorded in its dir for `ctrlmesh dev down`. Its own output goes
 * to a log file, never to the test output.
 */
export class ServerProcess {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private stopping = false;

  constructor(private readonly options: ServerProcessOptions) {}

  get logFile(): string {
    return join(this.options.dir, this.options.logFileName);
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Spawns the server and waits until its probe succeeds; on failure the server is stopped and the error shows its log. */
  async start(signal?: AbortSignal): Promise<void> {
    if (this.child) return;
    const { name, binary, args, dir, logger } = this.options;
    await mkdir(dir, { recursive: true });
    const fd = openSync(this.logFile, 'a');
    let child: ChildProcess;
    try {
      // detached: its own process group, so a terminal's Ctrl-C reaches only our process, which stops the servers in
      // order (API servers before etcd; all at once, kube-apiserver waits ~20 s for the etcd that went away).
      // --pdeathsig KILL: if our process dies without stopping them, the kernel kills them at once; a bed whose
      // owner died is abandoned anyway, and every bed starts fresh.
      child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', binary, ...args], { stdio: ['ignore', fd, fd], detached: true });
    } finally {
      closeSync(fd);
    }
    this.child = child;
    this.stopping = false;
    let exitNote: string | undefined;
    let ready = false;
    this.exited = new Promise<void>((resolve) => {
      child.once('error', (err: NodeJS.ErrnoException) => {
        exitNote =
          err.code === 'ENOENT' ? 'could not be spawned: setpriv (Debian package util-linux) is not on PATH' : `could not be spawned: ${err.message}`;
        resolve();
      });
      child.once('exit', (code, sig) => {
        exitNote = `exited with ${sig ?? `code ${code}`}`;
        // Before it is ready, start() reports the exit itself, with the log's tail.
        if (!this.stopping && ready) logger?.warn({ server: name, code, signal: sig, log: this.logFile }, `${name} ${exitNote}`);
        resolve();
      });
    }).then(async () => {
      if (this.child === child) this.child = undefined;
      await removePidFile(dir);
    });
    if (child.pid !== undefined) await writePidFile(dir, { pid: child.pid, binary: await realpath(binary), name });

    const deadline = Date.now() + this.options.readyTimeoutMs;
    for (;;) {
      if (exitNote !== undefined) throw await this.startError(`${name} ${exitNote} before it was ready`);
      if (signal?.aborted) {
        await this.stop();
        throw new TestbedError(`${name}: start interrupted (${String(signal.reason)})`, { cause: signal.reason });
      }
      if (await this.options.probe().catch(() => false)) break;
      if (Date.now() > deadline) {
        await this.stop();
        throw await this.startError(`${name} was not ready within ${this.options.readyTimeoutMs / 1000} s`);
      }
      await sleep(PROBE_INTERVAL_MS);
    }
    ready = true;
    logger?.debug({ server: name, pid: child.pid }, `${name} ready`);
  }

  /** SIGTERM, then SIGKILL after the stop timeout; resolves once the process is gone. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.stopping = true;
    // A paused (SIGSTOP) server would act on SIGTERM only when continued.
    child.kill('SIGCONT');
    child.kill('SIGTERM');
    // The timer is cancelled once the process exits, so it never holds the event loop open.
    const timer = new AbortController();
    const killed = await Promise.race([
      this.exited.then(() => false),
      sleep(this.options.stopTimeoutMs, true, { signal: timer.signal }).catch(() => false),
    ]);
    timer.abort();
    if (killed) {
      this.options.logger?.warn({ server: this.options.name }, `${this.options.name} ignored SIGTERM for ${this.options.stopTimeoutMs / 1000} s; killing it`);
      child.kill('SIGKILL');
      await this.exited;
    }
  }

  /** SIGKILL, as a crash would end it; resolves once the process is gone. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child) return;
    this.stopping = true;
    child.kill('SIGKILL');
    await this.exited;
  }

  /** Sends a signal to the running server (e.g. SIGSTOP and SIGCONT to freeze and thaw it); fails when none runs. */
  signal(sig: NodeJS.Signals): void {
    if (!this.child) throw new TestbedError(`${this.options.name} is not running: cannot send it ${sig}`);
    this.child.kill(sig);
  }

  private async startError(what: string): Promise<TestbedError> {
    const log = await readFile(this.logFile, 'utf8').catch(() => '');
    const tail = log.trimEnd().split('\n').slice(-LOG_TAIL_LINES).join('\n');
    return new TestbedError(`${what}; last lines of ${this.logFile}:\n${tail}`);
  }
}

/** The lifecycle part of every server handle: private servers in tests stop and restart through it. */
export interface ServerControl {
  logFile: string;
  pid(): number | undefined;
  stop(): Promise<void>;
  /** Starts again on the same ports, with the same data and certificates, after stop(). */
  start(signal?: AbortSignal): Promise<void>;
}

export function serverControl(server: ServerProcess): ServerControl {
  return {
    logFile: server.logFile,
    pid: () => server.pid,
    stop: () => server.stop(),
    start: (signal) => server.start(signal),
  };
}
