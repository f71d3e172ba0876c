import { CtrlmeshError, ErrorCodes } from '../errors.js';
import { runCommand, type Command, type CommandIO } from './command.js';
import { commandsFor } from './commands/index.js';

const root: Omit<Command, 'subcommands'> = {
  name: 'ctrlmesh',
  summary: 'ControllerMesh: shard, protect and federate Kubernetes operators across clusters.',
  usage: 'COMMAND [options]',
  details: 'Run `ctrlmesh COMMAND --help` for the options of a command.',
  options: {},
  run: async () => 2,
};

/** Runs the CLI; returns the exit code. Usage and file errors become one line on stderr and exit code 2. */
export async function run(argv: string[], io: CommandIO): Promise<number> {
  try {
    return await runCommand('', { ...root, subcommands: await commandsFor(argv) }, argv, io);
  } catch (err) {
    if (err instanceof CtrlmeshError && (err.code === ErrorCodes.USAGE || err.code === ErrorCodes.FILE)) {
      io.stderr.write(`ctrlmesh: ${err.message}\n`);
      return 2;
    }
    if (err instanceof CtrlmeshError) {
      io.stderr.write(`ctrlmesh: ${err.message}\n`);
      return 1;
    }
    throw err;
  }
}
