import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it, vi } from 'vitest';
import { commandsFor } from '../../../src/cli/commands/index.js';

// version.ts finds package.json relative to dist/; these tests run from the sources and do not need it.
vi.mock('../../../src/cli/commands/version.js', () => ({
  versionCommand: { name: 'version', summary: 'Print the version of ctrlmesh.', usage: '', options: {}, run: async () => 0 },
}));

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../../src');

/** The packages a module reaches through its static imports (type-only imports and `import()` left out). */
function packagesReached(entry: string): Map<string, string> {
  const reached = new Map<string, string>();
  const seen = new Set<string>();
  const queue = [entry];
  while (queue.length > 0) {
    const file = queue.shift()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const source = readFileSync(file, 'utf8');
    for (const [, specifier] of source.matchAll(/^(?:import|export)\s+(?!type\b)[^;]*?from\s+'([^']+)'/gmsu)) {
      if (specifier!.startsWith('.')) queue.push(join(dirname(file), specifier!.replace(/\.js$/u, '.ts')));
      else if (!reached.has(specifier!)) reached.set(specifier!, file.slice(SRC.length + 1));
    }
  }
  return reached;
}

describe('the CLI loads only the command it runs', () => {
  it('loads the named command alone, and every command for help or an unknown name', async () => {
    expect((await commandsFor(['proxy', '--listen', ':1'])).map((c) => c.name)).toEqual(['proxy']);
    const all = await commandsFor(['--help']);
    expect(all.map((c) => c.name)).toContain('agent');
    expect((await commandsFor(['nope'])).length).toBe(all.length);
    // Every command is listed under its own name.
    for (const command of all) expect((await commandsFor([command.name])).map((c) => c.name)).toEqual([command.name]);
    // Importing every command's code once takes seconds on a loaded machine.
  }, 60_000);

  it('keeps the Kubernetes client library out of the proxy sidecar and the manifest checker', () => {
    for (const entry of ['cli/main.ts', 'cli/commands/proxy.ts', 'cli/commands/validate.ts']) {
      const reached = packagesReached(join(SRC, entry));
      expect(reached.has('fastify'), entry).toBe(entry === 'cli/commands/proxy.ts');
      expect(reached.get('@kubernetes/client-node'), entry).toBeUndefined();
    }
  });
});
