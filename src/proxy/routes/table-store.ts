import { readFile } from 'node:fs/promises';
import type { Logger } from 'pino';
import { FileError } from '../../errors.js';
import type { RouteTable } from '../../transport/index.js';
import { writeFileAtomic } from './atomic-file.js';
import { parseRouteTable } from './route-table-file.js';

/** What is kept on disk: the last applied table and when a leased source last confirmed it. */
export interface StoredTable {
  table: RouteTable;
  /** Unix ms of the last lease extension from the live source: for people only, never judged by. */
  contactAt: number;
  /**
   * The same extension on the monotonic clock, with that clock's boot: a restart on the same boot counts the lease
   * on from it; any other (or none) starts fenced until a live extension.
   */
  lease?: { monotonicAt: number; boot: string };
}

/**
 * The last applied route table on disk, written atomically (temporary file, then rename) so a crash never
 * leaves half a table: a proxy that starts while the hub or NATS is down serves from it.
 */
export class TableStore {
  readonly path: string;
  private writes: Promise<void> = Promise.resolve();
  private readonly logger: Logger | undefined;

  /** `logger`: where a corrupt file is reported (one warning line naming it). */
  constructor(path: string, logger?: Logger) {
    this.path = path;
    this.logger = logger;
  }

  /** Saves are queued, so the file always ends as the last one asked for. */
  save(stored: StoredTable): Promise<void> {
    const write = (): Promise<void> => writeFileAtomic(this.path, `${JSON.stringify(stored)}\n`, 0o600);
    this.writes = this.writes.then(write, write);
    return this.writes;
  }

  /** Resolves once every queued save has finished (or failed: failures are reported to their callers). */
  async idle(): Promise<void> {
    await this.writes.catch(() => undefined);
  }

  /**
   * The stored table, or undefined when there is none yet or the file is corrupt (truncated, empty, not a route
   * table): a corrupt file is logged once and ignored, so the proxy waits for its live source rather than crash on
   * every start; the next applied table replaces it. A file that cannot be read at all (permissions, a directory)
   * is a configuration error (FileError).
   */
  async load(): Promise<StoredTable | undefined> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new FileError(this.path, `cannot read the stored route table (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, { cause: err });
    }
    const stored = parseStoredTable(text, this.path);
    if ('corrupt' in stored) {
      this.logger?.warn({ path: this.path, reason: stored.corrupt }, 'the stored route table is corrupt; ignoring it and waiting for the live source');
      return undefined;
    }
    return stored;
  }
}

/** Parses the store file's text: the stored table, or why it is not one (pure). */
export function parseStoredTable(text: string, origin: string): StoredTable | { corrupt: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    return { corrupt: text.trim() === '' ? 'the file is empty' : `not JSON (${(err as Error).message})` };
  }
  if (typeof parsed !== 'object' || parsed === null || !('table' in parsed)) return { corrupt: 'no "table" field' };
  const { table, contactAt, lease } = parsed as { table: unknown; contactAt?: unknown; lease?: unknown };
  try {
    const stored: StoredTable = { table: parseRouteTable(JSON.stringify(table), origin), contactAt: typeof contactAt === 'number' ? contactAt : 0 };
    const kept = storedLease(lease);
    return kept ? { ...stored, lease: kept } : stored;
  } catch (err) {
    return { corrupt: (err as Error).message };
  }
}

/** A stored monotonic extension, or undefined when absent or malformed (then it is not trusted: fenced at start). */
function storedLease(value: unknown): StoredTable['lease'] {
  if (typeof value !== 'object' || value === null) return undefined;
  const { monotonicAt, boot } = value as { monotonicAt?: unknown; boot?: unknown };
  if (typeof monotonicAt !== 'number' || !Number.isFinite(monotonicAt) || typeof boot !== 'string' || boot === '') return undefined;
  return { monotonicAt, boot };
}
