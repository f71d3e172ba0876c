import { spawn } from 'node:child_process';
import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import { delimiter, isAbsolute, join } from 'node:path';
import { TestbedError } from '../../errors.js';

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  /** Written to the command's stdin (e.g. an iptables-restore script). */
  input?: string;
  /** Killed (SIGKILL) after this long; a hung `ctr` must not hang a test bed's stop. */
  timeoutMs?: number;
  env?: NodeJS.ProcessEnv;
}

const DEFAULT_TIMEOUT_MS = 60_000;

/** Runs a short host command (ctr, ip, umount, iptables-restore) and collects its output; never throws for an exit code. */
export function tryRun(command: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'pipe'], env: options.env ?? process.env });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.once('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(
        new TestbedError(
          error.code === 'ENOENT' ? `${command} is not on PATH (a real node needs it; see README, "Test bed")` : `cannot run ${command}: ${error.message}`,
          { cause: error },
        ),
      );
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const stderr = Buffer.concat(err).toString('utf8');
      resolve({ code: signal ? null : code, stdout: Buffer.concat(out).toString('utf8'), stderr: signal ? `${stderr}(killed by ${signal})` : stderr });
    });
    // A command that exits without reading stdin makes the write fail with EPIPE; its exit status tells what happened.
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.input ?? '');
  });
}

/** Like tryRun, but a non-zero exit is an error naming the command and showing its stderr. */
export async function run(command: string, args: readonly string[], options: RunOptions = {}): Promise<string> {
  const result = await tryRun(command, args, options);
  if (result.code !== 0) {
    throw new TestbedError(`${command} ${args.join(' ')} failed (exit ${result.code ?? 'by signal'}): ${result.stderr.trim() || result.stdout.trim()}`);
  }
  return result.stdout;
}

/**
 * The absolute path of a host binary found on PATH. ServerProcess records the realpath of what it runs (so
 * `ctrlmesh dev down` never kills a reused pid), which needs an absolute path, not a bare name.
 */
export async function whichBinary(name: string, hint: string, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  if (isAbsolute(name)) return name;
  for (const dir of (env.PATH ?? '').split(delimiter).filter(Boolean)) {
    const candidate = join(dir, name);
    const found = await access(candidate, constants.X_OK).then(
      () => true,
      () => false,
    );
    if (found) return candidate;
  }
  throw new TestbedError(`${name} is not on PATH (${env.PATH ?? 'unset'}): ${hint}`);
}
