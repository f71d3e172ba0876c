import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readdir, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { ToolError } from '../errors.js';
import { packageRoot } from './package-root.js';
import type { ToolSpec } from './tool-specs.js';

const PROGRESS_EVERY_MS = 15_000;
const OUTPUT_TAIL_LINES = 30;

export interface GoBuildOptions {
  spec: ToolSpec;
  /** The final path; the binary appears there only once complete (built under a temporary name, then renamed). */
  target: string;
  env: NodeJS.ProcessEnv;
  onProgress: (message: string) => void;
  signal?: AbortSignal;
}

/** Builds one tool with the Go toolchain, reporting elapsed time while it runs. */
export async function goBuild(options: GoBuildOptions): Promise<void> {
  const { spec, target, env, onProgress, signal } = options;
  const label = `${spec.name} ${spec.version}`;
  // Called under the tool's lock: leftovers of a killed build of the same tool can go.
  const prefix = `.${basename(target)}.partial-`;
  for (const entry of await readdir(dirname(target))) {
    if (entry.startsWith(prefix)) await rm(join(dirname(target), entry), { recursive: true, force: true });
  }
  const scratch = await mkdtemp(join(dirname(target), prefix));
  const started = Date.now();
  onProgress(`building ${label} from ${spec.origin} with go; the first build takes minutes, later runs reuse ${target}`);
  const timer = setInterval(() => {
    onProgress(`still building ${label}: ${Math.round((Date.now() - started) / 1000)} s elapsed`);
  }, PROGRESS_EVERY_MS);
  try {
    const recipe = spec.recipe;
    let built: string;
    if (recipe.kind === 'build') {
      built = join(scratch, spec.name);
      await runGo({
        label,
        args: ['build', '-trimpath', '-ldflags', recipe.ldflags, '-o', built, recipe.pkg],
        cwd: join(packageRoot(), 'tools', recipe.moduleDir),
        env,
        signal,
      });
    } else {
      await runGo({
        label,
        args: ['install', '-trimpath', '-ldflags', recipe.ldflags, recipe.pkg],
        cwd: scratch,
        env: { ...env, GOBIN: scratch },
        signal,
      });
      built = join(scratch, recipe.binaryName);
    }
    await chmod(built, 0o755);
    await rename(built, target);
    onProgress(`built ${label} in ${Math.round((Date.now() - started) / 1000)} s: ${target}`);
  } finally {
    clearInterval(timer);
    await rm(scratch, { recursive: true, force: true });
  }
}

async function runGo(options: { label: string; args: string[]; cwd: string; env: NodeJS.ProcessEnv; signal?: AbortSignal }): Promise<void> {
  const tail: string[] = [];
  const keep = (chunk: Buffer): void => {
    tail.push(...chunk.toString('utf8').split('\n').filter(Boolean));
    tail.splice(0, Math.max(0, tail.length - OUTPUT_TAIL_LINES));
  };
  await mkdir(options.cwd, { recursive: true });
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn('go', options.args, { cwd: options.cwd, env: options.env, stdio: ['ignore', 'pipe', 'pipe'], signal: options.signal });
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    child.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') {
        reject(
          new ToolError(
            `building ${options.label} needs the Go toolchain (go 1.24 or newer) on PATH, and "go" was not found: ` +
              'install Go, or point the CTRLMESH_* variables or KUBEBUILDER_ASSETS at binaries you already have (see README, "Test bed")',
            { cause: err },
          ),
        );
      } else if (err.name === 'AbortError') {
        reject(new ToolError(`building ${options.label}: interrupted`, { cause: err }));
      } else {
        reject(new ToolError(`building ${options.label}: cannot run go: ${err.message}`, { cause: err }));
      }
    });
    child.on('close', resolve);
  });
  if (code !== 0) {
    throw new ToolError(
      `building ${options.label} failed: go ${options.args.join(' ')} (in ${options.cwd}) exited with ${code}; its last output:\n${tail.join('\n')}`,
    );
  }
}
