import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { Writable } from 'node:stream';
import { formatDuration, parseDuration, type OptionsResult } from '../api/index.js';
import { UsageError } from '../errors.js';
import { createLogger, LOG_LEVELS, type LogLevel, type Logger } from './logger.js';

export type OptionSpec = NonNullable<ParseArgsConfig['options']>[string] & { description: string; valueName?: string };

export interface CommandIO {
  stdout: Writable;
  stderr: Writable;
  env: NodeJS.ProcessEnv;
  /** Aborted on SIGINT/SIGTERM: long-running commands stop and clean up when it fires. */
  signal: AbortSignal;
}

export interface CommandContext extends CommandIO {
  values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  positionals: string[];
  logger: Logger;
}

export interface Command {
  name: string;
  summary: string;
  /** Shown after `ctrlmesh <name>` in the usage line, e.g. `[--algorithm A] NAMESPACE...`. */
  usage: string;
  /** Free text after the options in --help. */
  details?: string;
  options: Record<string, OptionSpec>;
  /** Returns the exit code. Throws UsageError / FileError for one-line errors with exit code 2. */
  run(ctx: CommandContext): Promise<number>;
  /** Subcommands (e.g. `dev up`), dispatched on the first positional. */
  subcommands?: Command[];
}

const COMMON_OPTIONS: Record<string, OptionSpec> = {
  help: { type: 'boolean', short: 'h', description: 'show this help' },
  'log-level': { type: 'string', valueName: 'LEVEL', description: `log level on stderr (${LOG_LEVELS.join(', ')}; default info)` },
};

export function helpText(path: string, cmd: Command): string {
  const lines = [`Usage: ctrlmesh${path} ${cmd.usage}`.trimEnd(), '', cmd.summary, ''];
  if (cmd.subcommands?.length) {
    lines.push('Commands:');
    for (const sub of cmd.subcommands) lines.push(`  ${sub.name.padEnd(14)}${sub.summary}`);
    lines.push('');
  }
  const all = { ...cmd.options, ...COMMON_OPTIONS };
  lines.push('Options:');
  for (const [name, spec] of Object.entries(all)) {
    const flag = `${spec.short ? `-${spec.short}, ` : '    '}--${name}${spec.type === 'string' ? ` ${spec.valueName ?? 'VALUE'}` : ''}`;
    lines.push(`  ${flag.padEnd(29)} ${spec.description}`);
  }
  if (cmd.details) lines.push('', cmd.details.trimEnd());
  return `${lines.join('\n')}\n`;
}

function parseLogLevel(value: unknown): LogLevel {
  if (value === undefined) return 'info';
  if (typeof value === 'string' && (LOG_LEVELS as readonly string[]).includes(value)) return value as LogLevel;
  throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(', ')}, not "${String(value)}"`);
}

/** Parses argv against the command's options (unknown flags are errors) and runs it. */
export async function runCommand(path: string, cmd: Command, argv: string[], io: CommandIO): Promise<number> {
  if (cmd.subcommands?.length) {
    const [first, ...rest] = argv;
    const sub = cmd.subcommands.find((s) => s.name === first);
    if (sub) return runCommand(`${path} ${sub.name}`, sub, rest, io);
    if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
      io.stdout.write(helpText(path, cmd));
      return first === undefined ? 2 : 0;
    }
    throw new UsageError(`unknown command "${first}" (see ctrlmesh${path} --help)`);
  }
  const options = Object.fromEntries(
    Object.entries({ ...cmd.options, ...COMMON_OPTIONS }).map(([k, { description: _d, valueName: _v, ...spec }]) => [k, spec]),
  );
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(`${(err as Error).message} (see ctrlmesh${path} --help)`, { cause: err });
  }
  if (parsed.values.help) {
    io.stdout.write(helpText(path, cmd));
    return 0;
  }
  const logger = createLogger(parseLogLevel(parsed.values['log-level']));
  return cmd.run({ ...io, values: parsed.values, positionals: parsed.positionals, logger });
}

export function stringValue(ctx: CommandContext, name: string): string | undefined {
  const v = ctx.values[name];
  return typeof v === 'string' ? v : undefined;
}

export function requiredString(ctx: CommandContext, name: string): string {
  const v = stringValue(ctx, name);
  if (v === undefined || v === '') throw new UsageError(`--${name} is required`);
  return v;
}

export function stringList(ctx: CommandContext, name: string): string[] {
  const v = ctx.values[name];
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : typeof v === 'string' ? [v] : [];
}

/**
 * The values a number or duration flag accepts, named as in a schema: a TypeBox integer field (the option it sets)
 * can be given as it is, so the flag and the options' check share one range.
 */
export interface FlagRange {
  minimum?: number;
  maximum?: number;
}

function bounds(range: FlagRange): { min: number; max: number } {
  return { min: range.minimum ?? 0, max: range.maximum ?? Number.MAX_SAFE_INTEGER };
}

/** An integer flag within the range; the error names the flag and the range. */
export function intValue(ctx: CommandContext, name: string, fallback: number, range: FlagRange): number {
  const raw = stringValue(ctx, name);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  const { min, max } = bounds(range);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new UsageError(`--${name} must be a whole number from ${min} to ${max}, not "${raw}"`);
  }
  return n;
}

const UNIT_MS = { ms: 1, s: 1000 } as const;
const UNIT_NAMES = { ms: 'milliseconds', s: 'seconds' } as const;

/**
 * A duration flag, written as Go and Kubernetes write durations (`500ms`, `15s`, `2m`, `1h30m`), as a whole number
 * of `unit` (milliseconds unless the option counts seconds); `fallback` and `range` are in that unit too. A bare
 * number is refused: its unit would be a guess.
 */
export function durationValue(ctx: CommandContext, name: string, fallback: number, range: FlagRange, unit: keyof typeof UNIT_MS = 'ms'): number {
  const raw = stringValue(ctx, name);
  if (raw === undefined) return fallback;
  const text = (n: number): string => formatDuration(n * UNIT_MS[unit]);
  const ms = parseDuration(raw);
  if (ms === undefined) throw new UsageError(`--${name} must be a duration such as ${text(fallback)} or 500ms, not "${raw}"`);
  const value = ms / UNIT_MS[unit];
  const { min, max } = bounds(range);
  if (!Number.isInteger(value)) throw new UsageError(`--${name} must be a whole number of ${UNIT_NAMES[unit]}, such as ${text(fallback)}, not "${raw}"`);
  if (value < min || value > max) throw new UsageError(`--${name} must be a duration from ${text(min)} to ${text(max)}, not "${raw}"`);
  return value;
}

/** Options a process's check accepted (parseHubOptions and the like), or one UsageError naming every problem. */
export function usableOptions<T>(result: OptionsResult<T>): T {
  if (result.ok) return result.options;
  throw new UsageError(result.problems.join('; '));
}
