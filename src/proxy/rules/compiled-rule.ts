import type { CircuitBreakerModel, FaultInjectionModel, FaultInjectionSpec } from '../../api/index.js';
import { CircuitRules, CompiledBreaker } from './circuit-rules.js';
import { FaultRules } from './fault-rules.js';
import type { RuleSet } from './rule-set.js';

export type RuleKind = 'CircuitBreaker' | 'FaultInjection';

/** Where a rule in force came from: the route table (a custom resource of the cluster) or a `--rules` file. */
export type RuleOrigin = 'cluster' | 'file';

/** Which rule it is: its state lives as long as these four are unchanged. */
export interface RuleIdentity {
  kind: RuleKind;
  namespace: string;
  name: string;
  generation: number;
}

/** A rule in force: who it is, where it came from, and its compiled form with its state. */
export type CompiledRule = RuleIdentity & { source: RuleOrigin } & (
    | { kind: 'CircuitBreaker'; breaker: CompiledBreaker }
    | { kind: 'FaultInjection'; fault: FaultInjectionSpec }
  );

/** Compiles a validated manifest; a CircuitBreaker's token buckets start full at `now`. */
export function compileRule(model: CircuitBreakerModel | FaultInjectionModel, generation: number, source: RuleOrigin, now: number): CompiledRule {
  const identity = { namespace: model.namespace, name: model.name, generation, source };
  return model.kind === 'CircuitBreaker'
    ? { ...identity, kind: 'CircuitBreaker', breaker: new CompiledBreaker(model.spec, now) }
    : { ...identity, kind: 'FaultInjection', fault: model.spec };
}

/** The rule set of the rules in force, in order (ties between rate limitings: the first declared wins). */
export function ruleSetOf(rules: readonly CompiledRule[], now: number): RuleSet {
  return {
    circuit: new CircuitRules(rules.flatMap((r) => (r.kind === 'CircuitBreaker' ? [r.breaker] : [])), now),
    faults: new FaultRules(rules.flatMap((r) => (r.kind === 'FaultInjection' ? [r.fault] : []))),
    inForce: rules,
  };
}
