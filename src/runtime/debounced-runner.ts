export interface DebouncedRunnerOptions {
  /** Quiet time after the last `schedule()` before the task runs. */
  delayMs: number;
  /** The work; its failures are the task's to log, a rejection is swallowed so the runner keeps going. */
  task: () => Promise<void>;
}

/**
 * Coalesces bursts of changes into one run of `task`, and never runs it twice at once: a `schedule()` that comes
 * while it runs earns exactly one more run (after the delay) once it has finished.
 */
export class DebouncedRunner {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;

  constructor(private readonly options: DebouncedRunnerOptions) {}

  schedule(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.run(), this.options.delayMs);
  }

  /** Cancels what is scheduled and waits for the run in progress, if any. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private async run(): Promise<void> {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.options.task().catch(() => undefined);
    await this.running;
    this.running = undefined;
    if (this.again) {
      this.again = false;
      this.schedule();
    }
  }
}
