import { createHash } from 'node:crypto';
import { chmod, cp, mkdir, mkdtemp, readFile, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTAINERD_NAME_ANNOTATION, MEDIA_TYPES, OCI_REF_NAME_ANNOTATION, writeOciArchive, type OciArchiveResult } from '../../../src/dev/index.js';

interface TarEntry {
  name: string;
  mode: number;
  uid: number;
  gid: number;
  mtime: number;
  type: string;
  linkname: string;
  data: Buffer;
}

/** A small reader for the tar formats GNU tar writes (ustar and GNU long names), independent of the code under test. */
function readTar(buf: Buffer): TarEntry[] {
  const entries: TarEntry[] = [];
  const text = (start: number, length: number): string => {
    const raw = buf.subarray(start, start + length);
    const end = raw.indexOf(0);
    return raw.subarray(0, end === -1 ? length : end).toString('utf8');
  };
  const octal = (start: number, length: number): number => parseInt(text(start, length).trim() || '0', 8);
  let offset = 0;
  let longName: string | undefined;
  while (offset + 512 <= buf.length) {
    if (buf.subarray(offset, offset + 512).every((b) => b === 0)) break;
    const size = octal(offset + 124, 12);
    const type = text(offset + 156, 1) || '0';
    const prefix = text(offset + 257, 6) === 'ustar' ? text(offset + 345, 155) : '';
    const data = buf.subarray(offset + 512, offset + 512 + size);
    if (type === 'L') {
      longName = data.toString('utf8').replace(/\0+$/, '');
    } else {
      const name = longName ?? (prefix ? `${prefix}/${text(offset, 100)}` : text(offset, 100));
      longName = undefined;
      entries.push({
        name,
        mode: octal(offset + 100, 8),
        uid: octal(offset + 108, 8),
        gid: octal(offset + 116, 8),
        mtime: octal(offset + 136, 12),
        type,
        linkname: text(offset + 157, 100),
        data: Buffer.from(data),
      });
    }
    offset += 512 + Math.ceil(size / 512) * 512;
  }
  return entries;
}

const sha256 = (data: Buffer): string => `sha256:${createHash('sha256').update(data).digest('hex')}`;

interface Layout {
  files: Map<string, TarEntry>;
  index: { schemaVersion: number; manifests: Array<{ mediaType: string; digest: string; size: number; annotations: Record<string, string>; platform: unknown }> };
  manifest: { mediaType: string; config: { mediaType: string; digest: string; size: number }; layers: Array<{ mediaType: string; digest: string; size: number }> };
  config: { architecture: string; os: string; config: Record<string, unknown>; rootfs: { type: string; diff_ids: string[] } };
  layer: Buffer;
}

async function readLayout(archive: string): Promise<Layout> {
  const files = new Map(readTar(await readFile(archive)).map((e) => [e.name, e]));
  const blob = (digest: string): Buffer => {
    const entry = files.get(`blobs/sha256/${digest.slice('sha256:'.length)}`);
    if (!entry) throw new Error(`no blob ${digest}`);
    return entry.data;
  };
  const index = JSON.parse(files.get('index.json')?.data.toString() ?? 'null') as Layout['index'];
  const manifest = JSON.parse(blob(index.manifests[0]?.digest ?? '').toString()) as Layout['manifest'];
  const config = JSON.parse(blob(manifest.config.digest).toString()) as Layout['config'];
  return { files, index, manifest, config, layer: blob(manifest.layers[0]?.digest ?? '') };
}

describe('OCI image archive', () => {
  let dir: string;
  let rootfs: string;
  let result: OciArchiveResult;
  let layout: Layout;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-oci-'));
    rootfs = join(dir, 'rootfs');
    await mkdir(join(rootfs, 'app', 'deep'), { recursive: true });
    await mkdir(join(rootfs, 'tmp'));
    await chmod(join(rootfs, 'tmp'), 0o1777);
    await writeFile(join(rootfs, 'app', 'run'), '#!/bin/true\n');
    await chmod(join(rootfs, 'app', 'run'), 0o755);
    await writeFile(join(rootfs, 'app', 'data.txt'), 'hello\n');
    await chmod(join(rootfs, 'app', 'data.txt'), 0o640);
    await writeFile(join(rootfs, 'app', 'deep', `${'n'.repeat(120)}.js`), 'export {};\n');
    await symlink('run', join(rootfs, 'app', 'link'));
    result = await writeOciArchive({
      rootfs,
      archive: join(dir, 'out', 'image.oci.tar'),
      ref: 'localhost/ctrlmesh/test:1.2.3',
      config: { entrypoint: ['/app/run'], cmd: ['x'], env: ['A=b'], user: '1000:1000', workingDir: '/app', labels: { z: '1', a: '2' } },
    });
    layout = await readLayout(result.archive);
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('is an OCI image layout whose blobs are named by their digests', () => {
    expect(JSON.parse(layout.files.get('oci-layout')?.data.toString() ?? '')).toEqual({ imageLayoutVersion: '1.0.0' });
    const blobs = [...layout.files.values()].filter((e) => e.name.startsWith('blobs/sha256/') && e.type === '0');
    expect(blobs).toHaveLength(3);
    for (const entry of blobs) expect(sha256(entry.data)).toBe(`sha256:${entry.name.slice('blobs/sha256/'.length)}`);
  });

  it('names the image for containerd and the tag for OCI tools in index.json', () => {
    expect(layout.index.schemaVersion).toBe(2);
    expect(layout.index.manifests).toHaveLength(1);
    const [entry] = layout.index.manifests;
    expect(entry).toMatchObject({
      mediaType: MEDIA_TYPES.manifest,
      digest: result.digest,
      platform: { architecture: 'amd64', os: 'linux' },
      annotations: { [CONTAINERD_NAME_ANNOTATION]: 'localhost/ctrlmesh/test:1.2.3', [OCI_REF_NAME_ANNOTATION]: '1.2.3' },
    });
    expect(entry?.size).toBe(layout.files.get(`blobs/sha256/${result.digest.slice(7)}`)?.data.length);
  });

  it('describes config and layer with their real digests and sizes, and diff_ids is the uncompressed layer digest', () => {
    const { manifest, config, layer } = layout;
    expect(manifest.mediaType).toBe(MEDIA_TYPES.manifest);
    expect(manifest.config).toMatchObject({ mediaType: MEDIA_TYPES.config, digest: result.configDigest });
    expect(manifest.layers).toEqual([{ mediaType: MEDIA_TYPES.layer, digest: result.layer.digest, size: layer.length }]);
    expect(sha256(layer)).toBe(result.layer.digest);
    const raw = gunzipSync(layer);
    expect(config.rootfs).toEqual({ type: 'layers', diff_ids: [sha256(raw)] });
    expect(result.diffId).toBe(sha256(raw));
    expect(result.layerUncompressedSize).toBe(raw.length);
    expect(config).toMatchObject({ architecture: 'amd64', os: 'linux' });
    expect(config.config).toEqual({
      User: '1000:1000',
      Env: ['A=b'],
      Entrypoint: ['/app/run'],
      Cmd: ['x'],
      WorkingDir: '/app',
      Labels: { a: '2', z: '1' },
    });
  });

  it('packs the root filesystem owned by root, at time zero, with modes and links kept', () => {
    const entries = readTar(gunzipSync(layout.layer));
    const byName = new Map(entries.map((e) => [e.name.replace(/\/$/, ''), e]));
    expect(entries.map((e) => e.name.replace(/\/$/, ''))).toEqual([
      'app',
      'app/data.txt',
      'app/deep',
      `app/deep/${'n'.repeat(120)}.js`,
      'app/link',
      'app/run',
      'tmp',
    ]);
    for (const e of entries) expect([e.uid, e.gid, e.mtime]).toEqual([0, 0, 0]);
    expect(byName.get('app/run')?.mode).toBe(0o755);
    expect(byName.get('app/data.txt')?.mode).toBe(0o640);
    expect(byName.get('tmp')?.mode).toBe(0o1777);
    expect(byName.get('app/link')).toMatchObject({ type: '2', linkname: 'run' });
    expect(byName.get('app/data.txt')?.data.toString()).toBe('hello\n');
  });

  it('gives the same digests and bytes for the same files, whatever their timestamps', async () => {
    const copy = join(dir, 'copy');
    await cp(rootfs, copy, { recursive: true, verbatimSymlinks: true });
    await utimes(join(copy, 'app', 'data.txt'), new Date(2001, 1, 1), new Date(2001, 1, 1));
    const again = await writeOciArchive({
      rootfs: copy,
      archive: join(dir, 'again.oci.tar'),
      ref: 'localhost/ctrlmesh/test:1.2.3',
      config: { entrypoint: ['/app/run'], cmd: ['x'], env: ['A=b'], user: '1000:1000', workingDir: '/app', labels: { a: '2', z: '1' } },
    });
    expect(again.digest).toBe(result.digest);
    expect(again.layer.digest).toBe(result.layer.digest);
    expect(sha256(await readFile(again.archive))).toBe(sha256(await readFile(result.archive)));
  });

  it('refuses a name without a tag', async () => {
    await expect(writeOciArchive({ rootfs, archive: join(dir, 'x.tar'), ref: 'localhost/ctrlmesh/test', config: {} })).rejects.toThrow(/needs a tag/);
  });
});
