import { unwatchFile, watchFile } from 'node:fs';
import type { Logger } from 'pino';
import type { RuleSource, RuleSourceHandlers } from '../rules/index.js';
import { loadRules } from './rules-file.js';

/**
 * Rules from CircuitBreaker and FaultInjection manifest files (`--rules`), re-read as a whole when any of them
 * changes (polled). A file that cannot be used at start is an error; a change that cannot be used is logged and the
 * current rules stay. A changed file also resets the rules' state (Manual recovery).
 */
export class FileRuleSource implements RuleSource {
  readonly description: string;
  private readonly paths: readonly string[];
  private readonly logger: Logger;
  private readonly intervalMs: number;
  private readonly now: () => number;
  private listener: (() => void) | undefined;

  constructor(options: { paths: readonly string[]; logger: Logger; pollIntervalMs?: number; now?: () => number }) {
    this.paths = options.paths;
    this.description = `files ${options.paths.join(', ')}`;
    this.logger = options.logger;
    this.intervalMs = options.pollIntervalMs ?? 500;
    this.now = options.now ?? Date.now;
  }

  async start(handlers: RuleSourceHandlers): Promise<void> {
    handlers.onRules(await loadRules(this.paths, this.now()));
    const files = this.paths;
    this.listener = () => {
      loadRules(files, this.now()).then(
        (next) => {
          handlers.onRules(next);
          this.logger.info({ files }, 'rules reloaded');
        },
        (err: unknown) => this.logger.error({ err }, 'rules changed but cannot be used; keeping the current rules'),
      );
    };
    for (const file of files) watchFile(file, { interval: this.intervalMs }, this.listener);
  }

  async stop(): Promise<void> {
    const listener = this.listener;
    this.listener = undefined;
    if (listener) for (const file of this.paths) unwatchFile(file, listener);
  }
}
