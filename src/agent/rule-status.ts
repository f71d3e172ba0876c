import type { CircuitBreakerStatus, ValidationResult } from '../api/index.js';
import type { Ack } from '../transport/index.js';
import { validationConditions } from './sharding-status.js';

/** The part of a CircuitBreaker's or FaultInjection's status the agent writes (the two kinds share it). */
export type RuleStatus = Required<Pick<CircuitBreakerStatus, 'observedGeneration' | 'conditions' | 'proxies'>>;

export interface RuleStatusInput {
  kind: 'CircuitBreaker' | 'FaultInjection';
  namespace: string;
  name: string;
  generation: number;
  validation: ValidationResult;
  /** The stored acknowledgements of the shards whose home cluster is the agent's (the rule's own cluster). */
  acks: readonly Ack[];
  previous: Partial<RuleStatus> | undefined;
  now: Date;
}

/**
 * The status the agent writes on a CircuitBreaker or FaultInjection (pure): Accepted and Invalid conditions (the
 * message names every field at fault; an invalid rule reaches no proxy), and each proxy that has it in force, from
 * the acknowledgements: operator, shard, pod, the generation it applied and the route-table version it came with.
 */
export function ruleStatus(input: RuleStatusInput): RuleStatus {
  const { kind, namespace, name, generation, validation } = input;
  const conditions = validationConditions({
    generation,
    validation,
    previous: input.previous?.conditions,
    now: input.now,
    valid: 'the rule is valid; the proxies of the pods it selects apply it',
  });
  const proxies = input.acks
    .flatMap((ack) =>
      (ack.rules ?? [])
        .filter((r) => r.kind === kind && r.namespace === namespace && r.name === name)
        .map((r) => ({ operator: ack.operator, shard: ack.shard, pod: ack.from ?? '', generation: r.generation, tableVersion: ack.version })),
    )
    .sort((a, b) => (a.operator === b.operator ? (a.shard < b.shard ? -1 : 1) : a.operator < b.operator ? -1 : 1));
  return { observedGeneration: generation, conditions, proxies };
}
