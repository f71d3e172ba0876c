export interface CoalescingRunnerOptions {
  /** Under a steady stream of changes, at most one run per this long (0: no limit). */
  intervalMs: number;
  /** How many runs a burst of changes gets back to back before `intervalMs` paces them. */
  burst?: number;
  /** The work; its failures are the task's to log, a rejection is swallowed so the runner keeps going. */
  task: () => Promise<void>;
  /** The clock of the pacing; default Date.now. */
  now?: () => number;
}

/** Enough for the few passes one edit causes (the change, then what it makes others report) to all run at once. */
export const DEFAULT_BURST = 5;

/**
 * Runs `task` for changes, never twice at once: the `schedule()` calls that come while it runs earn exactly one more
 * run, started as soon as it ends. A token bucket paces the runs: it holds `burst` runs and gains one per
 * `intervalMs`, so a change after a quiet moment never waits, while a steady stream gets one run per interval and
 * none starves. (A fixed window after each run, as before, made an isolated change wait whenever it landed in the
 * window of a run that changed nothing.)
 *
 * "At once" is the next turn of the event loop, so the `schedule()` calls of one synchronous burst make one run.
 *
 * `runDue()` asks for a run that a time calls for, not a change (a deadline, a periodic check): it is served like a
 * change but takes nothing from the bucket.
 */
export class CoalescingRunner {
  private timer: NodeJS.Timeout | undefined;
  private state: 'idle' | 'armed' | 'running' = 'idle';
  private running: Promise<void> | undefined;
  /** A request came while running: one more run once it ends. */
  private pending = false;
  /** Whether a change (not only a due time) asked for the run armed or pending. */
  private byChange = false;
  private stopped = false;
  private readonly burst: number;
  private readonly now: () => number;
  private tokens: number;
  private refilledAt: number;

  constructor(private readonly options: CoalescingRunnerOptions) {
    this.burst = options.burst ?? DEFAULT_BURST;
    this.now = options.now ?? Date.now;
    this.tokens = this.burst;
    this.refilledAt = this.now();
  }

  schedule(): void {
    this.request(true);
  }

  /** A run due at a time rather than after a change: at once, and it takes nothing from the bucket. */
  runDue(): void {
    this.request(false);
  }

  /** Cancels what is scheduled and waits for the run in progress, if any. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  private request(change: boolean): void {
    if (this.stopped) return;
    this.byChange ||= change;
    if (this.state === 'running') this.pending = true;
    else if (this.state === 'idle') this.arm(0);
  }

  private arm(delayMs: number): void {
    this.state = 'armed';
    this.timer = setTimeout(() => void this.run(), delayMs);
  }

  private async run(): Promise<void> {
    const wait = this.byChange ? this.take() : 0;
    if (wait > 0) {
      this.arm(wait);
      return;
    }
    this.state = 'running';
    this.pending = false;
    this.byChange = false;
    this.running = this.options.task().catch(() => undefined);
    await this.running;
    this.running = undefined;
    if (this.stopped) return;
    if (this.pending) this.arm(0);
    else this.state = 'idle';
  }

  /** Takes a run from the bucket: 0, or how long until the bucket holds one. */
  private take(): number {
    const { intervalMs } = this.options;
    if (intervalMs === 0) return 0;
    const now = this.now();
    this.tokens = Math.min(this.burst, this.tokens + Math.max(0, now - this.refilledAt) / intervalMs);
    this.refilledAt = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return 0;
    }
    return Math.ceil((1 - this.tokens) * intervalMs);
  }
}
