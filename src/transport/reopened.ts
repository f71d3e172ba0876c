import type { NatsLink } from './connection.js';

/** A watch of KV keys that outlives NATS trouble. */
export interface Watch {
  stop(): void;
  /** Drops the current watch and opens it again from the last revision seen (a watch that stalled). */
  restart(): void;
}

/** One opening of a watch, as the loop that reopens it sees it. */
export interface Opening {
  /**
   * Whether a restart or a stop came since this opening began: what it opens must then be dropped (an opening that
   * overlapped a reconnection may sit on a consumer the restarted server never delivers from).
   */
  readonly overtaken: boolean;
  /** How a restart ends this opening early. */
  onEnd(end: () => void): void;
  /** Ends this opening and opens the watch again. */
  restart(): void;
}

/**
 * Runs `follow` (one opening of a watch, resolving when it ends) again and again until stopped: after it ends or
 * fails (then `onError`, and `retryMs` of rest), and at once when the connection comes back or `restart` is called.
 * The KV watch (kv-watch.ts) and the hub-opened feed (feed-watch.ts) differ only in what one opening does.
 */
export function reopenUntilStopped(options: { link: NatsLink; retryMs: number; follow: (opening: Opening) => Promise<void>; onError: (err: unknown) => void }): Watch {
  let stopped = false;
  let generation = 0;
  let end: (() => void) | undefined;
  let wake: (() => void) | undefined;
  const restart = (): void => {
    generation += 1;
    end?.();
    wake?.();
  };
  const unlisten = options.link.onEvent((event) => {
    if (event.reconnected) restart();
  });
  void (async () => {
    while (!stopped) {
      const opened = generation;
      const opening: Opening = {
        get overtaken() {
          return stopped || opened !== generation;
        },
        onEnd: (fn) => {
          end = fn;
        },
        restart,
      };
      try {
        await options.follow(opening);
      } catch (err) {
        if (!stopped) options.onError(err);
      }
      end = undefined;
      if (stopped) break;
      await new Promise<void>((resolve) => {
        wake = resolve;
        setTimeout(resolve, options.retryMs);
      });
      wake = undefined;
    }
  })();
  return {
    stop() {
      stopped = true;
      unlisten();
      restart();
    },
    restart,
  };
}
