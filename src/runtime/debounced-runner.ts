export interface DebouncedRunnerOptions {
  /** How long after a run ends changes are folded into one more run, rather than starting one at once. */
  delayMs: number;
  /** The work; its failures are the task's to log, a rejection is swallowed so the runner keeps going. */
  task: () => Promise<void>;
}

/**
 * Runs `task` at once on the first change after a quiet period, then coalesces: `schedule()` calls that come while
 * it runs, or within `delayMs` after it ended, earn exactly one more run, `delayMs` after it ended. That run opens
 * the same window again; a window without a `schedule()` makes the runner quiet. Never runs the task twice at once.
 *
 * "At once" is the next turn of the event loop, so the `schedule()` calls of one synchronous burst make one run.
 *
 * `runDue()` asks for a run that a time calls for, not a change (a deadline, a periodic check): it is served like a
 * change, but a run asked for by no change opens no window, since there is no burst to fold; the next change after
 * it runs at once.
 */
export class DebouncedRunner {
  /** The next turn's run while armed, the end of the coalescing window while cooling. */
  private timer: NodeJS.Timeout | undefined;
  private state: 'quiet' | 'armed' | 'running' | 'cooling' = 'quiet';
  private running: Promise<void> | undefined;
  /** A change came while running or cooling: one more run at the end of the window. */
  private pending = false;
  /** Whether a change (not only a due time) asked for the run armed or pending. */
  private byChange = false;
  private stopped = false;

  constructor(private readonly options: DebouncedRunnerOptions) {}

  schedule(): void {
    this.request(true);
  }

  /** A run due at a time rather than after a change: at once when quiet, and it opens no window of its own. */
  runDue(): void {
    this.request(false);
  }

  private request(change: boolean): void {
    if (this.stopped) return;
    this.byChange ||= change;
    switch (this.state) {
      case 'quiet':
        this.state = 'armed';
        this.timer = setTimeout(() => void this.run(), 0);
        return;
      case 'armed':
        return;
      case 'running':
      case 'cooling':
        this.pending = true;
        return;
    }
  }

  /** Cancels what is scheduled and waits for the run in progress, if any. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private async run(): Promise<void> {
    this.state = 'running';
    this.pending = false;
    const byChange = this.byChange;
    this.byChange = false;
    this.running = this.options.task().catch(() => undefined);
    await this.running;
    this.running = undefined;
    if (this.stopped) return;
    if (!byChange && !this.pending) {
      this.state = 'quiet';
      return;
    }
    this.state = 'cooling';
    this.timer = setTimeout(() => this.cooled(), this.options.delayMs);
  }

  private cooled(): void {
    if (this.pending) void this.run();
    else this.state = 'quiet';
  }
}
