import { createRequire } from 'node:module';
import type { Command } from '../command.js';

const pkg = createRequire(import.meta.url)('../../../../package.json') as { version: string };

export const versionCommand: Command = {
  name: 'version',
  summary: 'Print the version of ctrlmesh.',
  usage: '',
  options: {},
  run: async ({ stdout }) => {
    stdout.write(`ctrlmesh ${pkg.version}\n`);
    return 0;
  },
};
