import { constants } from 'node:fs';
import { access, mkdir } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { ToolError } from '../errors.js';
import { withFileLock } from './file-lock.js';
import { goBuild } from './go-build.js';
import type { KubeVersion } from './kube-versions.js';
import { NODE_TOOL_NAMES, TOOL_NAMES, toolSpec, type ToolName } from './tool-specs.js';

export interface ToolOptions {
  env?: NodeJS.ProcessEnv;
  /** Progress of builds and waits, one human-readable line at a time. */
  onProgress?: (message: string) => void;
  /** Aborting it stops a build in progress. */
  signal?: AbortSignal;
  /** Which Kubernetes minor's kube-apiserver (src/dev/kube-versions.ts); the default when absent. */
  kubeVersion?: KubeVersion;
}

export interface ResolvedTool {
  name: ToolName;
  version: string;
  path: string;
  /** Where the path came from: an environment variable, KUBEBUILDER_ASSETS, the cache, or a build just now. */
  source: string;
}

/** `${XDG_CACHE_HOME:-$HOME/.cache}/ctrlmesh/bin`: outside the repository, shared by every checkout. */
export function toolCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'ctrlmesh', 'bin');
}

async function isExecutable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}

/**
 * Finds a tool, building it once if needed. Order: the tool's CTRLMESH_* variable, KUBEBUILDER_ASSETS, the cache,
 * then a Go build into the cache under a lock (a second process waits and reuses the result).
 */
export async function resolveTool(name: ToolName, options: ToolOptions = {}): Promise<ResolvedTool> {
  const env = options.env ?? process.env;
  const onProgress = options.onProgress ?? (() => undefined);
  const spec = toolSpec(name, options.kubeVersion);
  const existing = await findTool(name, env, options.kubeVersion);
  if (existing) return existing;
  const dir = toolCacheDir(env);
  const target = join(dir, `${name}-${spec.version}`);
  await mkdir(dir, { recursive: true });
  return withFileLock(
    {
      path: join(dir, `.${name}-${spec.version}.lock`),
      onWait: (pid, waitedMs) =>
        onProgress(`waiting for process ${pid ?? '?'} to finish building ${name} ${spec.version} (${Math.round(waitedMs / 1000)} s so far)`),
    },
    async () => {
      // Another process may have finished the build while we waited for the lock.
      if (await isExecutable(target)) return { name, version: spec.version, path: target, source: 'cache' };
      await goBuild({ spec, target, env, onProgress, signal: options.signal });
      return { name, version: spec.version, path: target, source: 'built' };
    },
  );
}

/** The tool from its CTRLMESH_* variable, KUBEBUILDER_ASSETS or the cache, without building; undefined if absent. */
export async function findTool(name: ToolName, env: NodeJS.ProcessEnv = process.env, kube?: KubeVersion): Promise<ResolvedTool | undefined> {
  const spec = toolSpec(name, kube);
  const found = (path: string, source: string): ResolvedTool => ({ name, version: spec.version, path, source });

  const explicit = env[spec.envVar];
  if (explicit) {
    if (await isExecutable(explicit)) return found(explicit, spec.envVar);
    throw new ToolError(`${spec.envVar}=${explicit}: no executable ${name} there; fix the path or unset ${spec.envVar} to build ${name} ${spec.version}`);
  }
  const assets = env.KUBEBUILDER_ASSETS;
  if (assets && spec.inKubebuilderAssets && (await isExecutable(join(assets, name)))) {
    return found(join(assets, name), 'KUBEBUILDER_ASSETS');
  }

  const target = join(toolCacheDir(env), `${name}-${spec.version}`);
  return (await isExecutable(target)) ? found(target, 'cache') : undefined;
}

/** Resolves every tool (with `node`, also a real node's), one build at a time (builds are heavy on a 2-core machine). */
export async function provisionTools(options: ToolOptions & { node?: boolean } = {}): Promise<ResolvedTool[]> {
  const resolved: ResolvedTool[] = [];
  for (const name of [...TOOL_NAMES, ...(options.node ? NODE_TOOL_NAMES : [])]) resolved.push(await resolveTool(name, options));
  return resolved;
}
