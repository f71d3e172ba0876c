import { readFile } from 'node:fs/promises';
import type { RouteTable } from '../transport/index.js';
import { writeFileAtomic } from './atomic-file.js';
import { parseRouteTable } from './route-table-file.js';

/** What is kept on disk: the last applied table and when a leased source last confirmed it. */
export interface StoredTable {
  table: RouteTable;
  /** Unix ms of the last contact with the live source; the lease runs from here after a restart. */
  contactAt: number;
}

/**
 * The last applied route table on disk, written atomically (temporary file, then rename) so a crash never
 * leaves half a table: a proxy that starts while the hub or NATS is down serves from it.
 */
export class TableStore {
  readonly path: string;
  private writes: Promise<void> = Promise.resolve();

  constructor(path: string) {
    this.path = path;
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

  /** The stored table, or undefined when there is none yet. */
  async load(): Promise<StoredTable | undefined> {
    let text: string;
    try {
      text = await readFile(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    const parsed = JSON.parse(text) as { table?: unknown; contactAt?: unknown };
    const table = parseRouteTable(JSON.stringify(parsed.table), this.path);
    return { table, contactAt: typeof parsed.contactAt === 'number' ? parsed.contactAt : 0 };
  }
}
