import type { RuleSet } from './rule-set.js';

/** What a rule source reports: each rule set it learns of, replacing the previous one as a whole. */
export interface RuleSourceHandlers {
  onRules(rules: RuleSet): void;
}

/**
 * Where CircuitBreaker and FaultInjection rules come from: `--rules` files now, the route table later. Shaped like
 * the RouteSource: the proxy starts it, is told of every rule set, and stops it; it sees only this interface.
 */
export interface RuleSource {
  /** Human-readable origin for logs (the files). */
  readonly description: string;
  /** Reports the first rule set before it resolves; rejects when there is none to start with. */
  start(handlers: RuleSourceHandlers): Promise<void>;
  stop(): Promise<void>;
}
