import type { Logger } from 'pino';

/**
 * Lets one log line through per key each interval and counts the others, so that a peer sending bad messages as fast
 * as it can fills no one's log. Keys are bounded by the caller (a cause and a subject the server's permissions tie
 * to one sender), never chosen freely by a peer; past `maxKeys` the oldest key is forgotten. Time is passed in.
 */
export class LogThrottle {
  readonly #last = new Map<string, { at: number; suppressed: number }>();

  constructor(
    private readonly intervalMs: number,
    private readonly now: () => number,
    private readonly maxKeys = 256,
  ) {}

  /** Whether to log under `key` now; when so, with how many lines were held back since the last one. */
  admit(key: string): { suppressed: number } | undefined {
    const now = this.now();
    const last = this.#last.get(key);
    if (last !== undefined && now - last.at < this.intervalMs) {
      last.suppressed++;
      return undefined;
    }
    this.#last.delete(key);
    if (this.#last.size >= this.maxKeys) this.#last.delete(this.#last.keys().next().value!);
    this.#last.set(key, { at: now, suppressed: 0 });
    return { suppressed: last?.suppressed ?? 0 };
  }

  /** Logs a warning under `key` when admitted, with `suppressed`: the warnings held back since the last. */
  warn(logger: Logger, key: string, fields: Record<string, unknown>, message: string): void {
    const admitted = this.admit(key);
    if (admitted) logger.warn({ ...fields, ...admitted }, message);
  }
}
