import { readFile } from 'node:fs/promises';
import { formatProblems, parseManifests, validateDocuments } from '../../api/index.js';
import { FileError, UsageError } from '../../errors.js';
import { stringList, type Command } from '../command.js';

/** Reads a file the user named; a missing or unreadable file is a FileError (exit 2) naming it. */
export async function readText(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const reason = code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : (err as Error).message;
    throw new FileError(path, `cannot read it: ${reason}`, { cause: err });
  }
}

/** The documents of a YAML (multi-document) or JSON file, empty ones left out. */
export async function readDocuments(path: string): Promise<unknown[]> {
  const text = await readText(path);
  try {
    return parseManifests(text);
  } catch (err) {
    throw new FileError(path, `is not valid YAML or JSON: ${(err as Error).message.split('\n')[0]}`, { cause: err });
  }
}

export const validateCommand: Command = {
  name: 'validate',
  summary: 'Check ShardingConfig, CircuitBreaker and FaultInjection manifests.',
  usage: '-f FILE [-f FILE...]',
  details:
    'Files are YAML (several documents allowed) or JSON. Prints every problem as FILE: Kind/name: field.path: reason\n' +
    'and exits 1 if there is any; documents of other API groups are skipped. Exits 0 when all are valid.',
  options: {
    filename: { type: 'string', short: 'f', multiple: true, valueName: 'FILE', description: 'manifest file (repeatable)' },
  },
  run: async (ctx) => {
    const files = [...stringList(ctx, 'filename'), ...ctx.positionals];
    if (files.length === 0) throw new UsageError('name at least one file with -f (see ctrlmesh validate --help)');
    let failed = false;
    for (const file of files) {
      const docs = await readDocuments(file);
      if (docs.length === 0) ctx.logger.info({ file }, 'no documents in the file');
      const { reports, skipped } = validateDocuments(docs);
      if (skipped > 0) ctx.logger.info({ file, skipped }, 'skipped documents of other API groups');
      for (const report of reports) {
        if (report.problems.length === 0) ctx.stdout.write(`${file}: ${report.kind}/${report.name}: valid\n`);
        for (const line of formatProblems(file, report)) ctx.stdout.write(`${line}\n`);
        failed ||= report.problems.length > 0;
      }
    }
    return failed ? 1 : 0;
  },
};
