import { constants } from 'node:fs';
import { access, copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { ToolError } from '../../errors.js';
import { withFileLock } from '../file-lock.js';
import { packageRoot } from '../package-root.js';
import { TOOL_SPECS, type ToolName } from '../tool-specs.js';
import { resolveTool, toolCacheDir } from '../tools.js';
import { contentKey, fileDigest } from './content-key.js';
import { writeOciArchive, type ImageRunConfig } from './oci-archive.js';
import { imageRefs, PROJECT_IMAGE_NAMES, type ImageRef, type ProjectImageName } from './refs.js';
import { assembleRootfs, IMAGE_USER, type RootfsEntry } from './rootfs.js';
import { runCommand } from './run.js';

// Part of every cache key: bump it when what a recipe puts into an image changes, so cached archives are rebuilt.
const RECIPE_VERSION = '2';
const NODE_IN_IMAGE = '/usr/local/bin/node';
const USER = `${IMAGE_USER.uid}:${IMAGE_USER.gid}`;
// The user of the upstream pause image (registry.k8s.io/pause): nobody needs a name for it.
const PAUSE_USER = '65535:65535';
const PAUSE_VERSION_DEFINE = 'v3.10-ctrlmesh';
const PATH_ENV = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export interface ImageBuildOptions {
  env?: NodeJS.ProcessEnv;
  /** One human-readable line per step, with sizes and seconds. */
  onProgress?: (message: string) => void;
  /** Aborting it stops a build in progress. */
  signal?: AbortSignal;
}

export interface BuiltImage {
  name: ProjectImageName;
  /** `localhost/ctrlmesh/<name>:<tag>`. */
  ref: string;
  /** The OCI archive, for `ctr images import`. */
  archive: string;
  /** The manifest digest (containerd's image digest). */
  digest: string;
  /** `cache` when an archive with the same key was reused, `built` when made now. */
  source: 'cache' | 'built';
}

/** `${XDG_CACHE_HOME:-$HOME/.cache}/ctrlmesh/images`: beside the tool cache, outside the repository. */
export function imageCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(dirname(toolCacheDir(env)), 'images');
}

/** How one image is made: its cache key (every input that reaches the layer) and how to fill its root filesystem. */
interface Recipe {
  image: ImageRef;
  key: string;
  config: ImageRunConfig;
  /** Fills `rootfs`; `scratch` is a private directory for intermediate files. */
  assemble(rootfs: string, scratch: string): Promise<void>;
}

interface Context {
  env: NodeJS.ProcessEnv;
  onProgress: (message: string) => void;
  signal: AbortSignal | undefined;
}

/** Builds the images one at a time (a 2-core machine builds one thing well rather than four badly). */
export async function buildProjectImages(options: ImageBuildOptions & { names?: readonly ProjectImageName[] } = {}): Promise<BuiltImage[]> {
  const built: BuiltImage[] = [];
  for (const name of options.names ?? PROJECT_IMAGE_NAMES) built.push(await buildProjectImage(name, options));
  return built;
}

/**
 * Builds one image into the image cache, or reuses the archive there when its key is unchanged. Built under a
 * lock, so two processes never build the same image at once (the second reuses the first one's archive).
 */
export async function buildProjectImage(name: ProjectImageName, options: ImageBuildOptions = {}): Promise<BuiltImage> {
  const ctx: Context = { env: options.env ?? process.env, onProgress: options.onProgress ?? (() => undefined), signal: options.signal };
  const started = Date.now();
  const recipe = await RECIPES[name](ctx);
  const dir = imageCacheDir(ctx.env);
  const stem = `${name}-${recipe.image.tag}`;
  const archive = join(dir, `${stem}.oci.tar`);
  const metaPath = join(dir, `${stem}.json`);
  const result = (digest: string, source: BuiltImage['source']): BuiltImage => ({ name, ref: recipe.image.ref, archive, digest, source });

  const hit = await cachedDigest(metaPath, archive, recipe);
  if (hit) {
    ctx.onProgress(`image ${recipe.image.ref}: unchanged (key ${recipe.key.slice(0, 12)}), reusing ${archive}`);
    return result(hit, 'cache');
  }
  await mkdir(dir, { recursive: true });
  return withFileLock(
    {
      path: join(dir, `.${stem}.lock`),
      onWait: (pid, waitedMs) => ctx.onProgress(`waiting for process ${pid ?? '?'} to finish building ${recipe.image.ref} (${seconds(waitedMs)} s so far)`),
    },
    async () => {
      // Another process may have built it while we waited for the lock.
      const again = await cachedDigest(metaPath, archive, recipe);
      if (again) return result(again, 'cache');
      // Called under the lock: leftovers of a killed build of this image can go.
      for (const entry of await readdir(dir)) {
        if (entry.startsWith(`.${stem}.partial-`)) await rm(join(dir, entry), { recursive: true, force: true });
      }
      const scratch = await mkdtemp(join(dir, `.${stem}.partial-`));
      try {
        const rootfs = join(scratch, 'rootfs');
        await mkdir(rootfs);
        await recipe.assemble(rootfs, scratch);
        const packed = Date.now();
        const oci = await writeOciArchive({ rootfs, archive, ref: recipe.image.ref, config: recipe.config, signal: ctx.signal });
        ctx.onProgress(
          `image ${recipe.image.ref}: layer ${mb(oci.layerUncompressedSize)} MB, ${mb(oci.layer.size)} MB gzipped in ${seconds(Date.now() - packed)} s; ` +
            `digest ${oci.digest}`,
        );
        const meta: CacheMeta = { key: recipe.key, ref: recipe.image.ref, digest: oci.digest };
        await writeFile(metaPath, `${JSON.stringify(meta, null, 2)}\n`);
        ctx.onProgress(`image ${recipe.image.ref}: built in ${seconds(Date.now() - started)} s: ${archive}`);
        return result(oci.digest, 'built');
      } finally {
        await rm(scratch, { recursive: true, force: true });
      }
    },
  );
}

interface CacheMeta {
  key: string;
  ref: string;
  digest: string;
}

async function cachedDigest(metaPath: string, archive: string, recipe: Recipe): Promise<string | undefined> {
  const text = await readFile(metaPath, 'utf8').catch(() => undefined);
  if (text === undefined || !(await exists(archive))) return undefined;
  try {
    const meta = JSON.parse(text) as Partial<CacheMeta>;
    return meta.key === recipe.key && meta.ref === recipe.image.ref && typeof meta.digest === 'string' ? meta.digest : undefined;
  } catch {
    return undefined; // a torn or hand-edited file: rebuild
  }
}

const RECIPES: Record<ProjectImageName, (ctx: Context) => Promise<Recipe>> = {
  controllermesh: controllermeshRecipe,
  'nats-server': (ctx) => toolRecipe(ctx, 'nats-server', { entrypoint: ['/nats-server'], user: USER }),
  'sample-controller': (ctx) => toolRecipe(ctx, 'sample-controller', { entrypoint: ['/sample-controller'], user: USER }),
  'conformance-operator': (ctx) => toolRecipe(ctx, 'conformance-operator', { entrypoint: ['/conformance-operator'], user: USER }),
  pause: pauseRecipe,
};

/** The hub, agents and proxies: node, the built dist/, the charts, dashboards and production node_modules. */
async function controllermeshRecipe(ctx: Context): Promise<Recipe> {
  const root = packageRoot();
  const image = imageRefs().controllermesh;
  if (!(await exists(join(root, 'dist', 'src', 'cli', 'main.js')))) {
    throw new ToolError(`the controllermesh image needs the compiled CLI at ${join(root, 'dist', 'src', 'cli', 'main.js')}: run \`npm run build\` first`);
  }
  const copied = ['dist', 'charts', 'dashboards', 'package.json', 'package-lock.json'];
  const hashStarted = Date.now();
  const key = await contentKey([
    { label: 'recipe', text: RECIPE_VERSION },
    { label: 'node', text: `${process.version} ${await fileDigest(process.execPath)}` },
    ...copied.map((name) => ({ label: name, path: join(root, name) })),
  ]);
  ctx.onProgress(`image ${image.ref}: inputs hashed in ${seconds(Date.now() - hashStarted)} s (key ${key.slice(0, 12)})`);
  return {
    image,
    key,
    config: {
      entrypoint: [NODE_IN_IMAGE, '/app/dist/src/cli/main.js'],
      env: [PATH_ENV, 'NODE_ENV=production'],
      user: USER,
      workingDir: '/app',
      labels: ociLabels('controllermesh', image.tag),
    },
    async assemble(rootfs) {
      const app = join(rootfs, 'app');
      await mkdir(app, { recursive: true });
      // npm ci installs exactly the lock file's production tree; run in the image's /app, it needs no copy after.
      for (const file of ['package.json', 'package-lock.json']) await copyFile(join(root, file), join(app, file));
      const npmStarted = Date.now();
      ctx.onProgress(`image ${image.ref}: npm ci --omit=dev (production dependencies only)`);
      await runCommand('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund'], {
        cwd: app,
        env: { ...ctx.env, NODE_ENV: 'production' },
        signal: ctx.signal,
        label: `installing the production dependencies of ${image.ref}`,
      });
      ctx.onProgress(`image ${image.ref}: production node_modules installed in ${seconds(Date.now() - npmStarted)} s`);
      const trees: RootfsEntry[] = ['dist', 'charts', 'dashboards'].map((name) => ({ source: join(root, name), target: `/app/${name}` }));
      const result = await assembleRootfs({ dir: rootfs, executables: [{ source: process.execPath, target: NODE_IN_IMAGE }], trees, signal: ctx.signal });
      ctx.onProgress(`image ${image.ref}: root filesystem assembled (node ${process.version} and ${result.libraries.length} libraries)`);
    },
  };
}

/** A Go binary from the tool cache (built there if missing), alone in an image with the libraries it loads. */
async function toolRecipe(ctx: Context, name: ToolName & ProjectImageName, config: ImageRunConfig): Promise<Recipe> {
  const image = imageRefs()[name];
  const tool = await resolveTool(name, { env: ctx.env, onProgress: ctx.onProgress, signal: ctx.signal });
  // The binary's own digest, not only its version: CTRLMESH_* may point at a different build of the same version.
  const key = await contentKey([
    { label: 'recipe', text: RECIPE_VERSION },
    { label: 'tool', text: `${name} ${tool.version} ${await fileDigest(tool.path)}` },
    { label: 'config', text: JSON.stringify(config) },
  ]);
  return {
    image,
    key,
    config: { ...config, labels: ociLabels(name, image.tag) },
    async assemble(rootfs) {
      const result = await assembleRootfs({ dir: rootfs, executables: [{ source: tool.path, target: `/${name}` }], signal: ctx.signal });
      ctx.onProgress(
        `image ${image.ref}: root filesystem assembled from ${tool.path} (${tool.source}; ` +
          `${result.libraries.length === 0 ? 'static' : `${result.libraries.length} libraries`})`,
      );
    },
  };
}

/**
 * The sandbox ("pause") image, compiled from the pause.c of the pinned k8s.io/kubernetes module with the
 * upstream flags (build/pause/Makefile): a static C program, so the image holds one file.
 */
async function pauseRecipe(ctx: Context): Promise<Recipe> {
  const image = imageRefs().pause;
  const spec = TOOL_SPECS['kube-apiserver'];
  if (spec.recipe.kind !== 'build') throw new ToolError('kube-apiserver is expected to build inside a wrapper module under tools/');
  const moduleDir = join(packageRoot(), 'tools', spec.recipe.moduleDir);
  const kubernetes = `k8s.io/kubernetes@${spec.version}`;
  const flags = ['-Os', '-Wall', '-Werror', '-static', `-DVERSION=${PAUSE_VERSION_DEFINE}`];
  const key = await contentKey([
    { label: 'recipe', text: RECIPE_VERSION },
    { label: 'source', text: `${kubernetes} build/pause/linux/pause.c ${flags.join(' ')} ${PAUSE_USER}` },
  ]);
  return {
    image,
    key,
    config: { entrypoint: ['/pause'], user: PAUSE_USER, labels: ociLabels('pause', image.tag) },
    async assemble(rootfs, scratch) {
      const label = `building ${image.ref}`;
      // The module is already in Go's module cache when kube-apiserver was built; otherwise this downloads it.
      const download = await runCommand('go', ['mod', 'download', '-json', kubernetes], { cwd: moduleDir, env: ctx.env, signal: ctx.signal, label });
      const sourceDir = (JSON.parse(download.stdout) as { Dir?: unknown }).Dir;
      if (typeof sourceDir !== 'string') throw new ToolError(`${label}: go mod download -json ${kubernetes} gave no Dir`);
      const source = join(sourceDir, 'build', 'pause', 'linux', 'pause.c');
      const binary = join(scratch, 'pause');
      const compiled = Date.now();
      await runCommand('gcc', [...flags, '-o', binary, source], { env: ctx.env, signal: ctx.signal, label });
      ctx.onProgress(`image ${image.ref}: compiled ${source} with gcc ${flags.join(' ')} in ${seconds(Date.now() - compiled)} s`);
      await assembleRootfs({ dir: rootfs, executables: [{ source: binary, target: '/pause' }], signal: ctx.signal });
    },
  };
}

function ociLabels(title: string, version: string): Record<string, string> {
  return { 'org.opencontainers.image.title': title, 'org.opencontainers.image.version': version };
}

async function exists(path: string): Promise<boolean> {
  return access(path, constants.F_OK).then(
    () => true,
    () => false,
  );
}

function mb(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(1);
}

function seconds(ms: number): string {
  return (ms / 1000).toFixed(1);
}
