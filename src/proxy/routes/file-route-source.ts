import { unwatchFile, watchFile, type Stats } from 'node:fs';
import type { Logger } from 'pino';
import type { RouteSource, RouteSourceHandlers } from './route-source.js';
import { readRouteTableFile } from './route-table-file.js';

/**
 * Route tables from a JSON file, re-read when it changes (polled, so an atomic rename by an editor or a
 * script is seen too). Static: no hub, so no lease and no acknowledgement.
 */
export class FileRouteSource implements RouteSource {
  readonly leased = false;
  readonly description: string;
  private readonly path: string;
  private readonly logger: Logger;
  private readonly intervalMs: number;
  private listener: ((curr: Stats, prev: Stats) => void) | undefined;

  constructor(options: { path: string; logger: Logger; pollIntervalMs?: number }) {
    this.path = options.path;
    this.description = `file ${options.path}`;
    this.logger = options.logger;
    this.intervalMs = options.pollIntervalMs ?? 500;
  }

  async start(handlers: RouteSourceHandlers): Promise<void> {
    handlers.onTable(await readRouteTableFile(this.path));
    handlers.onContact(true);
    this.listener = (curr, prev) => {
      if (curr.mtimeMs === prev.mtimeMs && curr.size === prev.size) return;
      readRouteTableFile(this.path).then(handlers.onTable, (err: unknown) =>
        this.logger.error({ err, path: this.path }, 'route table file changed but cannot be used; keeping the current table'),
      );
    };
    watchFile(this.path, { interval: this.intervalMs }, this.listener);
  }

  async stop(): Promise<void> {
    if (this.listener) unwatchFile(this.path, this.listener);
    this.listener = undefined;
  }
}
