import { durationMs, type CircuitBreakerSpec } from '../../api/index.js';
import { globScore, globToRegExp, resourceScore, type Call } from './matchers.js';
import { TokenBucket } from './token-bucket.js';

type RateLimiting = NonNullable<CircuitBreakerSpec['rateLimitings']>[number];
type InterceptRule = NonNullable<CircuitBreakerSpec['trafficInterceptRules']>[number];

export type LimitVerdict =
  | { action: 'allow' }
  | { action: 'deny'; code: 403 | 417 | 429; rule: string; cause: 'intercepted' | 'open' | 'rate-limited'; message: string; retryAfterSeconds?: number };

const ALLOW: LimitVerdict = { action: 'allow' };

class LimiterState {
  readonly rule: RateLimiting;
  private readonly bucket: TokenBucket;
  private readonly sleepMs: number | undefined;
  /** Open until this time (ms); Infinity = until the rules change (Manual recovery). */
  private openUntil = -Infinity;
  private readonly urlPatterns: { url: RegExp; score: number; method: string }[];

  constructor(rule: RateLimiting, now: number) {
    this.rule = rule;
    const intervalMs = durationMs(rule.bucket.interval);
    this.bucket = new TokenBucket({ burst: rule.bucket.burst, limit: rule.bucket.limit, intervalMs, now });
    const recover = rule.recoverPolicy;
    this.sleepMs = recover?.type === 'Manual' ? undefined : durationMs(recover?.sleepingWindowSize ?? rule.bucket.interval);
    this.urlPatterns = (rule.restRules ?? []).map((r) => ({ url: globToRegExp(r.url), score: globScore(r.url), method: r.method.toUpperCase() }));
  }

  /** How specifically this rule names the call, or undefined when it does not apply. */
  score(call: Call): number | undefined {
    if (call.kind === 'resource') {
      const scores = (this.rule.resourceRules ?? []).map((r) => resourceScore(r, call)).filter((s): s is number => s !== undefined);
      return scores.length === 0 ? undefined : Math.max(...scores);
    }
    const scores = this.urlPatterns
      .filter((p) => (p.method === '*' || p.method === call.method) && p.url.test(call.url))
      .map((p) => p.score * 2 + (p.method === '*' ? 0 : 1));
    return scores.length === 0 ? undefined : Math.max(...scores);
  }

  decide(now: number): LimitVerdict {
    const name = this.rule.name;
    switch (this.rule.triggerPolicy) {
      case 'ForceClosed':
        return ALLOW;
      case 'ForceOpened':
        return { action: 'deny', code: 417, rule: name, cause: 'open', message: `circuit breaker "${name}" is forced open` };
      case 'LimiterOnly': {
        if (this.bucket.take(now)) return ALLOW;
        return { action: 'deny', code: 429, rule: name, cause: 'rate-limited', message: `rate limit "${name}" exceeded`, retryAfterSeconds: this.retryAfter(now) };
      }
      case 'Normal': {
        if (now < this.openUntil) return this.open(now);
        if (this.bucket.take(now)) return ALLOW;
        this.openUntil = this.sleepMs === undefined ? Infinity : now + this.sleepMs;
        return this.open(now);
      }
    }
  }

  private open(now: number): LimitVerdict {
    const name = this.rule.name;
    const retryAfterSeconds = Number.isFinite(this.openUntil) ? Math.max(1, Math.ceil((this.openUntil - now) / 1000)) : undefined;
    const until = retryAfterSeconds === undefined ? 'until its rules change (Manual recovery)' : `for ${retryAfterSeconds}s more`;
    return { action: 'deny', code: 417, rule: name, cause: 'open', message: `circuit breaker "${name}" is open ${until}: its rate limit was exceeded`, ...(retryAfterSeconds === undefined ? {} : { retryAfterSeconds }) };
  }

  private retryAfter(now: number): number {
    const ms = this.bucket.msUntilToken(now);
    return Number.isFinite(ms) ? Math.max(1, Math.ceil(ms / 1000)) : 60;
  }
}

class InterceptState {
  readonly rule: InterceptRule;
  private readonly patterns: ((url: string) => boolean)[];
  private readonly methods: ReadonlySet<string> | undefined;
  private readonly whitelist: boolean;

  constructor(rule: InterceptRule) {
    this.rule = rule;
    this.whitelist = rule.interceptType === 'Whitelist' || rule.interceptType === 'White';
    this.methods = rule.methods?.length ? new Set(rule.methods.map((m) => m.toUpperCase())) : undefined;
    this.patterns = rule.contents.map((content) => {
      if (rule.contentType === 'Regexp') {
        const re = new RegExp(content);
        return (url: string) => re.test(url);
      }
      const glob = globToRegExp(content);
      return (url: string) => glob.test(url);
    });
  }

  /** True when the rule refuses this REST call. */
  refuses(method: string, url: string): boolean {
    if (this.methods && !this.methods.has(method)) return false;
    const listed = this.patterns.some((p) => p(url));
    return this.whitelist ? !listed : listed;
  }
}

/**
 * One CircuitBreaker compiled, with its state (token buckets, open breakers): kept while the rule is unchanged, so
 * rule sets built again around it (another route table, other rules beside it) carry its state on.
 */
export class CompiledBreaker {
  readonly limiters: readonly LimiterState[];
  readonly intercepts: readonly InterceptState[];

  constructor(spec: CircuitBreakerSpec, now: number) {
    this.limiters = (spec.rateLimitings ?? []).map((r) => new LimiterState(r, now));
    this.intercepts = (spec.trafficInterceptRules ?? []).map((r) => new InterceptState(r));
  }
}

/**
 * CircuitBreaker rules compiled once: traffic interception for external REST calls, then the most specific
 * rate-limiting rule (ties: the first declared) with its trigger and recover policy. Time is passed in. Built from
 * specs (fresh state) or from compiled breakers (their state shared).
 */
export class CircuitRules {
  private readonly limiters: LimiterState[];
  private readonly intercepts: InterceptState[];

  constructor(specs: readonly (CircuitBreakerSpec | CompiledBreaker)[], now: number) {
    const compiled = specs.map((s) => (s instanceof CompiledBreaker ? s : new CompiledBreaker(s, now)));
    this.limiters = compiled.flatMap((c) => c.limiters);
    this.intercepts = compiled.flatMap((c) => c.intercepts);
  }

  get empty(): boolean {
    return this.limiters.length === 0 && this.intercepts.length === 0;
  }

  check(call: Call, now: number): LimitVerdict {
    if (call.kind === 'rest') {
      const refusing = this.intercepts.find((i) => i.refuses(call.method, call.url));
      if (refusing) {
        return { action: 'deny', code: 403, rule: refusing.rule.name, cause: 'intercepted', message: `${call.method} ${call.url} is refused by traffic rule "${refusing.rule.name}"` };
      }
    }
    let best: LimiterState | undefined;
    let bestScore = -1;
    for (const limiter of this.limiters) {
      const score = limiter.score(call);
      if (score !== undefined && score > bestScore) {
        best = limiter;
        bestScore = score;
      }
    }
    return best === undefined ? ALLOW : best.decide(now);
  }
}
