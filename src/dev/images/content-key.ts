import { createHash, type Hash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * A digest of files and directory trees: relative names, modes, link targets and contents, in a fixed order.
 * It decides whether a cached image still matches its inputs, so it covers everything that goes into the layer.
 */
export async function contentKey(parts: ReadonlyArray<{ label: string; path: string } | { label: string; text: string }>): Promise<string> {
  const hash = createHash('sha256');
  for (const part of parts) {
    hash.update(`part\0${part.label}\0`);
    if ('text' in part) hash.update(`text\0${part.text}\0`);
    else await hashPath(hash, part.path, '.');
  }
  return hash.digest('hex');
}

/** The sha256 of one file, streamed. */
export async function fileDigest(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

async function hashPath(hash: Hash, path: string, name: string): Promise<void> {
  const info = await lstat(path);
  const mode = (info.mode & 0o7777).toString(8);
  if (info.isSymbolicLink()) {
    hash.update(`link\0${name}\0${await readlink(path)}\0`);
  } else if (info.isDirectory()) {
    hash.update(`dir\0${name}\0${mode}\0`);
    for (const entry of (await readdir(path)).sort()) await hashPath(hash, join(path, entry), `${name}/${entry}`);
  } else {
    hash.update(`file\0${name}\0${mode}\0${info.size}\0${await fileDigest(path)}\0`);
  }
}
