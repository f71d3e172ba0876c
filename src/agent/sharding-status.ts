import type { Condition, ShardingConfigStatus, ValidationResult } from '../api/index.js';
import type { RouteTable } from '../transport/index.js';

export interface StatusInput {
  generation: number;
  validation: ValidationResult;
  /** The route tables of the operator this config defines (`<namespace>/<name>`). */
  routes: readonly RouteTable[];
  previous: ShardingConfigStatus | undefined;
  now: Date;
}

/**
 * Accepted and Invalid conditions of an object the agent validates (pure): the message names every field at fault.
 * A condition keeps its lastTransitionTime while its status does not change.
 */
export function validationConditions(input: {
  generation: number;
  validation: ValidationResult;
  previous: readonly Condition[] | undefined;
  now: Date;
  /** The message when valid. */
  valid: string;
}): Condition[] {
  const { validation, generation } = input;
  const message = validation.ok ? input.valid : validation.problems.map((p) => `${p.path}: ${p.reason}`).join('; ');
  const condition = (type: string, status: Condition['status'], reason: string): Condition => {
    const before = input.previous?.find((c) => c.type === type);
    return {
      type,
      status,
      reason,
      message,
      lastTransitionTime: before && before.status === status ? before.lastTransitionTime : input.now.toISOString(),
      observedGeneration: generation,
    };
  };
  return validation.ok
    ? [condition('Accepted', 'True', 'Valid'), condition('Invalid', 'False', 'Valid')]
    : [condition('Accepted', 'False', 'Invalid'), condition('Invalid', 'True', 'Invalid')];
}

/**
 * The status the agent writes on a ShardingConfig (pure): Accepted and Invalid conditions (the message names every
 * field at fault), the buckets each shard owns per cluster, and the generation they describe.
 */
export function shardingConfigStatus(input: StatusInput): ShardingConfigStatus {
  const { validation, generation } = input;
  const conditions = validationConditions({ generation, validation, previous: input.previous?.conditions, now: input.now, valid: 'the configuration is valid' });
  const shards = [...input.routes]
    .sort((a, b) => (a.shard < b.shard ? -1 : 1))
    .map((t) => ({ name: t.shard, version: t.version, clusters: t.clusters.map((c) => ({ name: c.name, buckets: c.buckets })) }));
  return {
    ...(input.previous?.root ? { root: input.previous.root } : {}),
    observedGeneration: generation,
    conditions,
    shards,
  };
}

/** Whether writing `next` would change what is stored; the API server returns keys sorted, so order is ignored. */
export function statusChanged(previous: object | undefined, next: object): boolean {
  return canonical(previous ?? {}) !== canonical(next);
}

function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );
}
