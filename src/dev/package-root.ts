import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

let cached: string | undefined;

/**
 * The directory of ControllerMesh's package.json. Found by walking up because this module runs both from
 * src/ (vitest) and from dist/src/ (the built CLI), which sit at different depths.
 */
export function packageRoot(): string {
  if (cached) return cached;
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = join(dir, 'package.json');
    if (existsSync(candidate) && (JSON.parse(readFileSync(candidate, 'utf8')) as { name?: string }).name === 'controllermesh') {
      cached = dir;
      return dir;
    }
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`package.json of controllermesh not found above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
}
