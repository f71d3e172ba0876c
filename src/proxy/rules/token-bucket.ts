/**
 * A token bucket: holds at most `burst` tokens, gains `limit` tokens per `intervalMs`, starts full. Time is
 * passed in, so tests need no clock.
 */
export class TokenBucket {
  private tokens: number;
  private last: number;
  private readonly burst: number;
  private readonly perMs: number;

  constructor(options: { burst: number; limit: number; intervalMs: number; now: number }) {
    this.burst = options.burst;
    this.perMs = options.intervalMs > 0 ? options.limit / options.intervalMs : 0;
    this.tokens = options.burst;
    this.last = options.now;
  }

  /** Takes one token if there is one. */
  take(now: number): boolean {
    this.refill(now);
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  /** Milliseconds until the next token (Infinity when the bucket never refills). */
  msUntilToken(now: number): number {
    this.refill(now);
    if (this.tokens >= 1) return 0;
    return this.perMs === 0 ? Infinity : Math.ceil((1 - this.tokens) / this.perMs);
  }

  private refill(now: number): void {
    if (now > this.last) this.tokens = Math.min(this.burst, this.tokens + (now - this.last) * this.perMs);
    this.last = Math.max(this.last, now);
  }
}
