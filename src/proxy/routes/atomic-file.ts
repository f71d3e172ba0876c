import { mkdir, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

let sequence = 0;

/** Writes a file through a temporary name and a rename, so a reader or a crash never sees half of it. */
export async function writeFileAtomic(path: string, text: string, mode: number): Promise<void> {
  const temporary = `${path}.${process.pid}.${sequence++}.tmp`;
  await mkdir(dirname(path), { recursive: true });
  await writeFile(temporary, text, { mode });
  await rename(temporary, path);
}
