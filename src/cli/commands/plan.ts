import { FileError, InvalidConfigError } from '../../errors.js';
import { parsePlanDocument, plan } from '../../sharding/index.js';
import { requiredString, stringValue, type Command } from '../command.js';
import { readText } from './validate.js';

async function readJson<T extends 'input' | 'assignment'>(path: string, what: T) {
  const text = await readText(path);
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new FileError(path, `is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  try {
    return parsePlanDocument(what, doc);
  } catch (err) {
    if (err instanceof InvalidConfigError) throw new FileError(path, err.message, { cause: err });
    throw err;
  }
}

export const planCommand: Command = {
  name: 'plan',
  summary: 'Plan which shard owns each (cluster, bucket) unit, and the moves from a previous assignment.',
  usage: '-f INPUT.json [--previous ASSIGNMENT.json]',
  details:
    'Prints {"assignment", "moves", "unassigned", "stats"} as JSON. The input and assignment formats are described in\n' +
    'docs/sharding.md; the "assignment" printed is a valid --previous for the next run.',
  options: {
    filename: { type: 'string', short: 'f', valueName: 'FILE', description: 'planner input (JSON): clusters, weights, operators' },
    previous: { type: 'string', valueName: 'FILE', description: 'the previous assignment (JSON), to keep units where they are' },
  },
  run: async (ctx) => {
    const input = await readJson(requiredString(ctx, 'filename'), 'input');
    const previousPath = stringValue(ctx, 'previous');
    const previous = previousPath === undefined ? undefined : await readJson(previousPath, 'assignment');
    try {
      ctx.stdout.write(`${JSON.stringify(plan(input, previous), null, 2)}\n`);
    } catch (err) {
      // Input that passes the schema can still be inconsistent (a name listed twice, a bucket out of range).
      if (err instanceof InvalidConfigError) throw new FileError(requiredString(ctx, 'filename'), err.message, { cause: err });
      throw err;
    }
    return 0;
  },
};
