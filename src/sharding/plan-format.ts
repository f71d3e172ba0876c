import { Type, type Static } from '@sinclair/typebox';
import { LabelSelectorSchema, schemaProblems } from '../api/index.js';
import { InvalidConfigError } from '../errors.js';
import { HASH_ALGORITHMS } from './hash.js';

const closed = { additionalProperties: false } as const;

export const CLUSTER_HEALTH = ['Ready', 'Unknown', 'Offline'] as const;
export type ClusterHealth = (typeof CLUSTER_HEALTH)[number];

export const ClusterInputSchema = Type.Object(
  {
    name: Type.String({ minLength: 1 }),
    labels: Type.Optional(Type.Record(Type.String(), Type.String())),
    health: Type.Optional(Type.Union(CLUSTER_HEALTH.map((h) => Type.Literal(h)))),
  },
  closed,
);

export const ShardInputSchema = Type.Object(
  {
    name: Type.String({ minLength: 1 }),
    /** The cluster its pods run in. */
    homeCluster: Type.String({ minLength: 1 }),
    /** Fixed buckets of its home cluster (a hand-written config, or a root without `clusters`): not planned. */
    buckets: Type.Optional(Type.Array(Type.Integer({ minimum: 0 }))),
  },
  closed,
);

export const OperatorInputSchema = Type.Object(
  {
    /** `<namespace>/<name>` of the root or hand-written ShardingConfig. */
    name: Type.String({ minLength: 1 }),
    /** Clusters whose units the planned shards share; default: the planned shards' home clusters. */
    clusters: Type.Optional(LabelSelectorSchema),
    /** The only clusters it may span, whatever `clusters` selects (the hub's --operator-file); default: any. */
    within: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
    /** Every shard may own units of every cluster (spec.controller.multicluster). */
    multicluster: Type.Optional(Type.Boolean()),
    shards: Type.Array(ShardInputSchema),
  },
  closed,
);

export const PlanInputSchema = Type.Object(
  {
    hash: Type.Optional(
      Type.Object(
        {
          algorithm: Type.Optional(Type.Union(HASH_ALGORITHMS.map((a) => Type.Literal(a)))),
          bucketCount: Type.Optional(Type.Integer({ minimum: 1, maximum: 65536 })),
        },
        closed,
      ),
    ),
    clusters: Type.Array(ClusterInputSchema),
    /** Object counts per (cluster, namespace), as agents report them. */
    weights: Type.Array(
      Type.Object(
        { cluster: Type.String(), namespace: Type.String(), objects: Type.Integer({ minimum: 0 }) },
        closed,
      ),
    ),
    operators: Type.Array(OperatorInputSchema),
    options: Type.Optional(
      Type.Object(
        {
          /** Re-plan the units of shards whose home cluster is Offline (default false: no churn on flapping). */
          moveUnitsOfOfflineClusters: Type.Optional(Type.Boolean()),
        },
        closed,
      ),
    ),
  },
  closed,
);

/** Who owns what: operator -> shard -> cluster -> sorted buckets. Also the `--previous` input of the next plan. */
export const AssignmentSchema = Type.Object(
  {
    operators: Type.Record(Type.String(), Type.Record(Type.String(), Type.Record(Type.String(), Type.Array(Type.Integer({ minimum: 0 }))))),
  },
  closed,
);

export type ClusterInput = Static<typeof ClusterInputSchema>;
export type ShardInput = Static<typeof ShardInputSchema>;
export type OperatorInput = Static<typeof OperatorInputSchema>;
export type PlanInput = Static<typeof PlanInputSchema>;
export type Assignment = Static<typeof AssignmentSchema>;

export interface Move {
  operator: string;
  cluster: string;
  bucket: number;
  /** Previous owner; null for a unit nobody owned. */
  from: string | null;
  /** New owner; null when the unit is no longer owned (its cluster left, or nobody can reach it). */
  to: string | null;
  weight: number;
}

export interface OperatorStats {
  units: number;
  totalWeight: number;
  heaviestUnit: number;
  movedWeight: number;
  /** Load per shard (sum of its units' weights), in shard name order. */
  loads: Record<string, number>;
}

export interface PlanResult {
  assignment: Assignment;
  moves: Move[];
  /** Units no live shard can reach (e.g. a cluster without a shard of a non-multicluster operator). */
  unassigned: { operator: string; cluster: string; bucket: number; reason: string }[];
  stats: Record<string, OperatorStats>;
}

/** Checks a parsed planner input (or assignment); the error lists every problem with its field path. */
export function parsePlanDocument<T extends 'input' | 'assignment'>(
  what: T,
  doc: unknown,
): T extends 'input' ? PlanInput : Assignment {
  const problems = schemaProblems(what === 'input' ? PlanInputSchema : AssignmentSchema, doc);
  if (problems.length > 0) {
    throw new InvalidConfigError(`invalid planner ${what}: ${problems.map((p) => `${p.path}: ${p.reason}`).join('; ')}`);
  }
  return doc as T extends 'input' ? PlanInput : Assignment;
}
