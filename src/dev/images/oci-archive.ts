import { spawn } from 'node:child_process';
import { createHash, type Hash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { ToolError } from '../../errors.js';
import { parseImageRef } from './refs.js';
import { runCommand } from './run.js';

export const MEDIA_TYPES = {
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar+gzip',
} as const;

/** containerd's annotation with the full image name; `ctr images import` names the image after it. */
export const CONTAINERD_NAME_ANNOTATION = 'io.containerd.image.name';
/** The OCI annotation: in an image layout it holds only the tag. */
export const OCI_REF_NAME_ANNOTATION = 'org.opencontainers.image.ref.name';

// Every timestamp is the epoch, so the same root filesystem gives the same digests on every machine and every run.
const EPOCH = '1970-01-01T00:00:00Z';
// Owner, group and mtime are fixed; modes are kept. The C locale keeps --sort=name a plain byte order.
const TAR_FLAGS = ['--create', '--format=gnu', '--sort=name', '--owner=0', '--group=0', '--numeric-owner', '--mtime=@0'];

/** The runtime settings of an image (the `config` object of an OCI image configuration). */
export interface ImageRunConfig {
  entrypoint?: string[];
  cmd?: string[];
  /** `NAME=value` entries. */
  env?: string[];
  /** `uid`, `uid:gid` or a user name of the image's /etc/passwd. */
  user?: string;
  workingDir?: string;
  labels?: Record<string, string>;
}

export interface OciArchiveOptions {
  /** The root filesystem, which becomes the image's only layer. */
  rootfs: string;
  /** Where to write the archive; it appears there only once complete. */
  archive: string;
  /** The full name with a tag, e.g. `localhost/ctrlmesh/pause:3.10`. */
  ref: string;
  config: ImageRunConfig;
  signal?: AbortSignal;
}

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
  platform?: { architecture: string; os: string };
}

export interface OciArchiveResult {
  archive: string;
  ref: string;
  /** The manifest's digest: the image's digest once imported. */
  digest: string;
  /** The config's digest: what Kubernetes shows as the image ID. */
  configDigest: string;
  layer: Descriptor;
  /** The digest of the uncompressed layer (the config's rootfs.diff_ids). */
  diffId: string;
  /** Bytes of the uncompressed layer. */
  layerUncompressedSize: number;
  archiveSize: number;
}

/**
 * Writes an OCI image layout (oci-layout, index.json, blobs/sha256/...) as one uncompressed tar: the form
 * `ctr images import` reads. The layer streams from GNU tar through gzip to disk, digested on the way, so a
 * large root filesystem never sits in memory.
 */
export async function writeOciArchive(options: OciArchiveOptions): Promise<OciArchiveResult> {
  const { tag } = parseImageRef(options.ref);
  const outDir = dirname(options.archive);
  await mkdir(outDir, { recursive: true });
  const work = await mkdtemp(join(outDir, `.${basename(options.archive)}.partial-`));
  try {
    const blobs = join(work, 'blobs', 'sha256');
    await mkdir(blobs, { recursive: true });

    const layer = await writeLayer(options.rootfs, blobs, options.signal);
    const config = {
      created: EPOCH,
      architecture: 'amd64',
      os: 'linux',
      config: runConfig(options.config),
      rootfs: { type: 'layers', diff_ids: [layer.diffId] },
      history: [{ created: EPOCH, created_by: 'ctrlmesh: one layer from an assembled root filesystem' }],
    };
    const configDesc = await writeJsonBlob(blobs, MEDIA_TYPES.config, config);
    const manifest = { schemaVersion: 2, mediaType: MEDIA_TYPES.manifest, config: configDesc, layers: [layer.descriptor] };
    const manifestDesc = await writeJsonBlob(blobs, MEDIA_TYPES.manifest, manifest);
    const index = {
      schemaVersion: 2,
      mediaType: MEDIA_TYPES.index,
      manifests: [
        {
          ...manifestDesc,
          platform: { architecture: 'amd64', os: 'linux' },
          annotations: { [CONTAINERD_NAME_ANNOTATION]: options.ref, [OCI_REF_NAME_ANNOTATION]: tag },
        },
      ],
    };
    await writeFile(join(work, 'index.json'), JSON.stringify(index));
    await writeFile(join(work, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
    await normaliseModes(work);

    const partial = join(work, 'archive.tar');
    await runCommand('tar', [...TAR_FLAGS, '--file', partial, '--directory', work, '--', 'blobs', 'index.json', 'oci-layout'], {
      label: `writing the image archive ${options.archive}`,
      env: { ...process.env, LC_ALL: 'C' },
      signal: options.signal,
    });
    await rename(partial, options.archive);
    return {
      archive: options.archive,
      ref: options.ref,
      digest: manifestDesc.digest,
      configDigest: configDesc.digest,
      layer: layer.descriptor,
      diffId: layer.diffId,
      layerUncompressedSize: layer.uncompressedSize,
      archiveSize: (await stat(options.archive)).size,
    };
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** Only the fields given, in the OCI spelling (capitalised keys), so an unset field is absent rather than null. */
function runConfig(config: ImageRunConfig): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (config.user !== undefined) out.User = config.user;
  if (config.env !== undefined) out.Env = config.env;
  if (config.entrypoint !== undefined) out.Entrypoint = config.entrypoint;
  if (config.cmd !== undefined) out.Cmd = config.cmd;
  if (config.workingDir !== undefined) out.WorkingDir = config.workingDir;
  if (config.labels !== undefined) out.Labels = Object.fromEntries(Object.entries(config.labels).sort(([a], [b]) => (a < b ? -1 : 1)));
  return out;
}

/** Passes bytes through unchanged while hashing and counting them. */
class Digester extends Transform {
  readonly hash: Hash = createHash('sha256');
  size = 0;

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.hash.update(chunk);
    this.size += chunk.length;
    callback(null, chunk);
  }

  digest(): string {
    return `sha256:${this.hash.digest('hex')}`;
  }
}

interface Layer {
  descriptor: Descriptor;
  diffId: string;
  uncompressedSize: number;
}

/** tar | digest (diff_id) | gzip | digest (blob) | file, then renamed to its digest. */
async function writeLayer(rootfs: string, blobs: string, signal?: AbortSignal): Promise<Layer> {
  // The top-level entries by name rather than ".", so member names read "etc/passwd" (no "./" and no entry for
  // the root directory, whose mode would be the build directory's).
  const entries = (await readdir(rootfs)).sort();
  if (entries.length === 0) throw new ToolError(`${rootfs} is empty: an image needs at least one file`);
  const tmp = join(blobs, '.layer.partial');
  const child = spawn('tar', [...TAR_FLAGS, '--file', '-', '--directory', rootfs, '--', ...entries], {
    env: { ...process.env, LC_ALL: 'C' },
    stdio: ['ignore', 'pipe', 'pipe'],
    signal,
  });
  const stderr: string[] = [];
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve, reject) => {
    child.on('error', (err: NodeJS.ErrnoException) =>
      reject(new ToolError(err.code === 'ENOENT' ? 'building an image needs GNU tar on PATH' : `cannot run tar: ${err.message}`, { cause: err })),
    );
    child.on('close', resolve);
  });
  const raw = new Digester();
  const compressed = new Digester();
  // Level 6 is gzip's default; a fixed level (and zlib's zero mtime in the header) keeps the blob reproducible.
  const [code] = await Promise.all([exited, pipeline(child.stdout, raw, createGzip({ level: 6 }), compressed, createWriteStream(tmp))]);
  if (code !== 0) throw new ToolError(`packing ${rootfs} with tar failed (exit ${code ?? 'signal'}):\n${stderr.join('').trim()}`);
  const digest = compressed.digest();
  await rename(tmp, join(blobs, digest.slice('sha256:'.length)));
  return { descriptor: { mediaType: MEDIA_TYPES.layer, digest, size: compressed.size }, diffId: raw.digest(), uncompressedSize: raw.size };
}

async function writeJsonBlob(blobs: string, mediaType: string, value: unknown): Promise<Descriptor> {
  const bytes = Buffer.from(JSON.stringify(value));
  const hex = createHash('sha256').update(bytes).digest('hex');
  await writeFile(join(blobs, hex), bytes);
  return { mediaType, digest: `sha256:${hex}`, size: bytes.length };
}

/** Fixed modes for the layout's own files, so the archive does not depend on the umask. */
async function normaliseModes(dir: string): Promise<void> {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      await chmod(path, 0o755);
      await normaliseModes(path);
    } else {
      await chmod(path, 0o644);
    }
  }
}
