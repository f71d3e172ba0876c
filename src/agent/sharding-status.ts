import type { ShardingConfigStatus, ValidationResult } from '../api/index.js';
import type { RouteTable } from '../transport/index.js';

type Condition = NonNullable<ShardingConfigStatus['conditions']>[number];

export interface StatusInput {
  generation: number;
  validation: ValidationResult;
  /** The route tables of the operator this config defines (`<namespace>/<name>`). */
  routes: readonly RouteTable[];
  previous: ShardingConfigStatus | undefined;
  now: Date;
}

/**
 * The status the agent writes on a ShardingConfig (pure): Accepted and Invalid conditions (the message names every
 * field at fault), the buckets each shard owns per cluster, and the generation they describe. A condition keeps its
 * lastTransitionTime while its status does not change.
 */
export function shardingConfigStatus(input: StatusInput): ShardingConfigStatus {
  const { validation, generation } = input;
  const message = validation.ok
    ? 'the configuration is valid'
    : validation.problems.map((p) => `${p.path}: ${p.reason}`).join('; ');
  const condition = (type: string, status: Condition['status'], reason: string): Condition => {
    const before = input.previous?.conditions?.find((c) => c.type === type);
    return {
      type,
      status,
      reason,
      message,
      lastTransitionTime: before && before.status === status ? before.lastTransitionTime : input.now.toISOString(),
      observedGeneration: generation,
    };
  };
  const conditions = validation.ok
    ? [condition('Accepted', 'True', 'Valid'), condition('Invalid', 'False', 'Valid')]
    : [condition('Accepted', 'False', 'Invalid'), condition('Invalid', 'True', 'Invalid')];
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
export function statusChanged(previous: ShardingConfigStatus | undefined, next: ShardingConfigStatus): boolean {
  return canonical(previous ?? {}) !== canonical(next);
}

function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );
}
