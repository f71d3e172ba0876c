import type { AckRule, RouteTable } from '../../transport/index.js';
import type { RuleSet } from './rule-set.js';

/** What a rule source reports: each rule set it learns of, replacing the previous one as a whole. */
export interface RuleSourceHandlers {
  onRules(rules: RuleSet): void;
  /**
   * The cluster rules in force from the current route table changed without a new table (the pod's labels changed):
   * the table is acknowledged again, naming them.
   */
  onApplied?(): void;
}

/**
 * Where CircuitBreaker and FaultInjection rules come from: `--rules` files, and the route table's cluster rules that
 * select this pod. Shaped like the RouteSource: the proxy starts it, is told of every rule set, and stops it; it sees
 * only this interface.
 */
export interface RuleSource {
  /** Human-readable origin for logs (the files). */
  readonly description: string;
  /** Reports the first rule set before it resolves; rejects when there is none to start with. */
  start(handlers: RuleSourceHandlers): Promise<void>;
  stop(): Promise<void>;
  /** A source of cluster rules is told of every route table installed, before it is acknowledged. */
  tableInstalled?(table: RouteTable): void;
  /** The cluster rules of `table` in force on this proxy: what the table's acknowledgement names. */
  appliedRules?(table: RouteTable): AckRule[];
}
