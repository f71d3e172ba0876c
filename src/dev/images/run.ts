import { spawn } from 'node:child_process';
import { ToolError } from '../../errors.js';

const TAIL_LINES = 30;
// stdout is kept only for commands whose answer we parse (ldd, go mod download -json); a cap keeps a chatty
// command from growing memory without bound.
const STDOUT_LIMIT = 4 * 1024 * 1024;

export interface RunOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  signal?: AbortSignal;
  /** Exit codes that are not failures (ldd exits 1 for a static binary). */
  okCodes?: readonly number[];
  /** Named in errors: what the command was for, e.g. "image pause 3.10". */
  label: string;
}

export interface RunResult {
  code: number;
  stdout: string;
  /** The last lines of stderr. */
  stderr: string;
}

/**
 * Runs one command to completion. Failures become a ToolError naming the purpose, the command and its last
 * output, so a failed image build says what to fix without a second run.
 */
export async function runCommand(command: string, args: readonly string[], options: RunOptions): Promise<RunResult> {
  const tail: string[] = [];
  const chunks: Buffer[] = [];
  let kept = 0;
  const describe = `${command} ${args.join(' ')}${options.cwd ? ` (in ${options.cwd})` : ''}`;
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
      signal: options.signal,
    });
    child.stdout.on('data', (chunk: Buffer) => {
      if (kept >= STDOUT_LIMIT) return;
      chunks.push(chunk);
      kept += chunk.length;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      tail.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      tail.splice(0, Math.max(0, tail.length - TAIL_LINES));
    });
    child.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') reject(new ToolError(`${options.label}: "${command}" was not found on PATH; install it`, { cause: err }));
      else if (err.name === 'AbortError') reject(new ToolError(`${options.label}: interrupted`, { cause: err }));
      else reject(new ToolError(`${options.label}: cannot run ${command}: ${err.message}`, { cause: err }));
    });
    child.on('close', resolve);
  });
  const stdout = Buffer.concat(chunks).toString('utf8');
  const stderr = tail.join('\n');
  if (code === null || !(code === 0 || options.okCodes?.includes(code))) {
    const output = stderr || stdout.split('\n').slice(-TAIL_LINES).join('\n');
    throw new ToolError(`${options.label}: ${describe} exited with ${code ?? 'a signal'}; its last output:\n${output}`);
  }
  return { code, stdout, stderr };
}
