import type { ProxyMetrics } from '../../metrics/index.js';
import { CircuitRules, type LimitVerdict } from './circuit-rules.js';
import { FaultRules, type FaultPlan } from './fault-rules.js';
import type { CompiledRule } from './compiled-rule.js';
import type { Call } from './matchers.js';

/**
 * The rules in force: swapped as a whole when they change (a `--rules` file, the route table's cluster rules, the
 * pod's labels). A rule that stays keeps its state across swaps (see compiled-rule.ts).
 */
export interface RuleSet {
  circuit: CircuitRules;
  faults: FaultRules;
  /** Each rule in force, in order: the metrics name them. */
  inForce: readonly CompiledRule[];
}

/** No rules: every call passes (what the egress port judges by when no rules are configured). */
export function emptyRules(now: number): RuleSet {
  return { circuit: new CircuitRules([], now), faults: new FaultRules([]), inForce: [] };
}

export interface RuleClock {
  now: () => number;
  random: () => number;
}

export type RuleOutcome =
  | { action: 'pass'; delayMs: number }
  | { action: 'deny'; code: number; message: string; retryAfterSeconds?: number; delayMs: number };

/** Judges one call against the rules and counts what they did; the caller waits and answers. */
export function judge(rules: RuleSet, call: Call, clock: RuleClock, metrics: ProxyMetrics): RuleOutcome {
  const now = clock.now();
  const verdict: LimitVerdict = rules.circuit.empty ? { action: 'allow' } : rules.circuit.check(call, now);
  if (verdict.action === 'deny') {
    (verdict.cause === 'intercepted' ? metrics.intercepted : metrics.rateLimited).inc({ rule: verdict.rule });
    return { action: 'deny', code: verdict.code, message: verdict.message, delayMs: 0, ...(verdict.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: verdict.retryAfterSeconds }) };
  }
  if (rules.faults.empty) return { action: 'pass', delayMs: 0 };
  const plan: FaultPlan = rules.faults.plan(call, new Date(now), clock.random);
  for (const rule of plan.delayedBy) metrics.faultsInjected.inc({ rule, fault: 'delay' });
  if (plan.abort) {
    metrics.faultsInjected.inc({ rule: plan.abort.rule, fault: 'abort' });
    return { action: 'deny', code: plan.abort.httpStatus, message: `fault injected by rule "${plan.abort.rule}"`, delayMs: plan.delayMs };
  }
  return { action: 'pass', delayMs: plan.delayMs };
}
