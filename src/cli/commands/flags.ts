import { readFileSync } from 'node:fs';
import { FileError, UsageError } from '../../errors.js';
import type { OperatorClusters } from '../../hub/options.js';
import type { BootstrapToken } from '../../hub/registration.js';
import { HASH_ALGORITHMS, type HashAlgorithm } from '../../sharding/index.js';
import { stringValue, type CommandContext } from '../command.js';

/** Reads a file named by a flag; an unreadable file is a FileError naming the flag and the path. */
export function readFlagFile(flag: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new FileError(path, `cannot read the file given to --${flag}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, { cause: err });
  }
}

/** The trimmed lines of a file named by a flag that are neither blank nor comments (#), with their line numbers. */
function contentLines(flag: string, path: string): { text: string; number: number }[] {
  return readFlagFile(flag, path)
    .split('\n')
    .map((raw, i) => ({ text: raw.trim(), number: i + 1 }))
    .filter(({ text }) => text !== '' && !text.startsWith('#'));
}

/** Non-empty, trimmed lines of a token file (comments start with #). */
export function readTokens(path: string): string[] {
  const tokens = contentLines('token-file', path).map(({ text }) => text);
  if (tokens.length === 0) throw new FileError(path, 'the token file holds no token (one per line)');
  return tokens;
}

/**
 * The hub's bootstrap tokens: one `CLUSTER TOKEN` line each (comments start with #), or `CLUSTER TOKEN KEY=VALUE,...`
 * to give the cluster its labels (then its agent's are not used). A token registers the cluster it names and no other.
 */
export function readBootstrapTokens(path: string): BootstrapToken[] {
  const tokens = contentLines('token-file', path).map(({ text, number }): BootstrapToken => {
    const fields = text.split(/\s+/);
    const [cluster, token, labels] = fields as [string, string, string | undefined];
    if (fields.length < 2 || fields.length > 3) {
      throw new FileError(path, `line ${number}: write "CLUSTER TOKEN" or "CLUSTER TOKEN KEY=VALUE,..." (a bootstrap token is bound to one cluster)`);
    }
    if (labels === undefined) return { cluster, token };
    const pairs = labels.split(',').map((pair) => {
      const eq = pair.indexOf('=');
      if (eq <= 0) throw new FileError(path, `line ${number}: labels are KEY=VALUE pairs separated by commas, not "${labels}"`);
      return [pair.slice(0, eq), pair.slice(eq + 1)] as const;
    });
    return { cluster, token, labels: Object.fromEntries(pairs) };
  });
  if (tokens.length === 0) throw new FileError(path, 'the token file holds no "CLUSTER TOKEN" line');
  return tokens;
}

/**
 * The hub's operator file: `NAMESPACE/NAME CLUSTER,...` per line, the clusters that may define and span the operator
 * whose root or hand-written ShardingConfig is NAMESPACE/NAME. An empty file lists no operator: none is planned.
 */
export function readOperatorFile(path: string): OperatorClusters {
  return contentLines('operator-file', path).map(({ text, number }) => {
    const fields = text.split(/\s+/);
    const [operator, clusters] = fields as [string, string | undefined];
    const slash = operator.indexOf('/');
    if (fields.length !== 2 || clusters === undefined || slash <= 0 || slash !== operator.lastIndexOf('/') || slash === operator.length - 1) {
      throw new FileError(path, `line ${number}: write "NAMESPACE/NAME CLUSTER,..." (the clusters that may define and span the operator)`);
    }
    const names = clusters.split(',');
    if (names.some((c) => c === '')) throw new FileError(path, `line ${number}: cluster names are separated by single commas, not "${clusters}"`);
    return { operator, clusters: names };
  });
}

/** `HOST:PORT`: an IPv4 address, a name or a bracketed IPv6 address (`[::1]:5443`), and a port (0 picks one). */
export function parseListen(flag: string, value: string): { host: string; port: number } {
  const at = value.lastIndexOf(':');
  const port = Number(value.slice(at + 1));
  if (at <= 0 || !/^\d+$/.test(value.slice(at + 1)) || port > 65535) {
    throw new UsageError(`--${flag} must be HOST:PORT (e.g. 127.0.0.1:9464), not "${value}"`);
  }
  return { host: value.slice(0, at).replace(/^\[(.*)\]$/, '$1'), port };
}

/** `key=value` pairs of a repeated flag. */
export function parseLabels(flag: string, values: readonly string[]): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const v of values) {
    const eq = v.indexOf('=');
    if (eq <= 0) throw new UsageError(`--${flag} must be KEY=VALUE, not "${v}"`);
    labels[v.slice(0, eq)] = v.slice(eq + 1);
  }
  return labels;
}

/** Resolves when the command's signal fires (SIGINT/SIGTERM). */
export function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
}

/** `--hash-algorithm`, the same flag for the agent (how it labels) and the hub (what its fleet uses). */
export const hashAlgorithmFlag = (description: string) =>
  ({ type: 'string', valueName: 'NAME', description: `namespace hash: ${HASH_ALGORITHMS.join(' or ')}${description}` }) as const;

/** The `--hash-algorithm` given, if any; another name is a usage error. */
export function hashAlgorithmValue(ctx: CommandContext): HashAlgorithm | undefined {
  const algorithm = stringValue(ctx, 'hash-algorithm');
  if (algorithm === undefined) return undefined;
  if (!(HASH_ALGORITHMS as readonly string[]).includes(algorithm)) {
    throw new UsageError(`--hash-algorithm must be ${HASH_ALGORITHMS.join(' or ')}, not "${algorithm}"`);
  }
  return algorithm as HashAlgorithm;
}
