import { Type, type Static } from '@sinclair/typebox';
import { ConditionSchema } from './conditions.js';
import { childPath, type FieldProblem } from './field-problem.js';
import { LabelSelectorSchema, ResourceGroupSchema, labelSelectorProblems, type LabelSelector, type ResourceGroup } from './label-selector.js';
import { IntOrString } from './schema-types.js';

const closed = { additionalProperties: false } as const;

/** `spec.objectLabels`: see the schema's description. */
export const OBJECT_LABELS = ['Auto', 'Always', 'Never'] as const;
export type ObjectLabels = (typeof OBJECT_LABELS)[number];


/** KusionStack's ObjectLimiter: the resources a limit applies to and the selector their objects must match. */
const ObjectLimiterSchema = Type.Object(
  {
    relateResources: Type.Optional(Type.Array(ResourceGroupSchema)),
    selector: Type.Optional(LabelSelectorSchema),
  },
  closed,
);

/**
 * One entry of `spec.limits`. The seed documents show two forms: relateResources + selector directly, or wrapped in
 * `objectSelector`. Both are one object type here (a structural CRD schema allows no oneOf); semantics check that
 * exactly one form is used, and both normalise to {@link ShardLimit}.
 */
export const LimitSchema = Type.Object(
  {
    relateResources: Type.Optional(Type.Array(ResourceGroupSchema)),
    selector: Type.Optional(LabelSelectorSchema),
    objectSelector: Type.Optional(ObjectLimiterSchema),
  },
  closed,
);

/**
 * One entry of `spec.root.resourceSelector`: a ResourceGroup (apiGroups + resources, as the examples write it) or an
 * ObjectLimiter (relateResources + selector, as KusionStack's Go type has it).
 */
const ResourceSelectorSchema = Type.Object(
  {
    apiGroups: Type.Optional(Type.Array(Type.String())),
    resources: Type.Optional(Type.Array(Type.String())),
    relateResources: Type.Optional(Type.Array(ResourceGroupSchema)),
    selector: Type.Optional(LabelSelectorSchema),
  },
  closed,
);

/**
 * The most pods an auto-sharding root may place (canary replicas plus shardingSize x everyShardReplicas). Its children
 * are computed on every planning pass, pod ordinals included, from whatever a member cluster reports: an unbounded
 * count would let one report exhaust the hub's memory (test/unit/hub/rogue-report.test.ts, 'a root of a billion
 * replicas: invalid, naming the field, and planned in no time while prod plans on'). No operator runs that many
 * replicas.
 */
export const MAX_ROOT_PODS = 10_000;

const RootSchema = Type.Object(
  {
    disable: Type.Optional(Type.Boolean()),
    prefix: Type.String({ minLength: 1, maxLength: 200, pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' }),
    targetStatefulSet: Type.String({ minLength: 1 }),
    canary: Type.Optional(
      Type.Object(
        {
          replicas: Type.Integer({ minimum: 0, maximum: MAX_ROOT_PODS }),
          inNamespaces: Type.Optional(Type.Array(Type.String())),
          inShardHash: Type.Optional(Type.Array(IntOrString({ description: 'a bucket number' }))),
        },
        closed,
      ),
    ),
    auto: Type.Optional(
      Type.Object(
        {
          shardingSize: Type.Integer({ minimum: 1, description: 'number of normal shards' }),
          everyShardReplicas: Type.Integer({ minimum: 1, maximum: MAX_ROOT_PODS, description: 'pods per normal shard' }),
        },
        closed,
      ),
    ),
    resourceSelector: Type.Optional(Type.Array(ResourceSelectorSchema)),
    clusters: Type.Optional(
      Type.Object(
        { ...LabelSelectorSchema.properties },
        {
          ...closed,
          description:
            'ControllerMesh extension: the registered clusters this operator spans (a label selector over clusters). ' +
            'With it the planner chooses each shard\'s (cluster, bucket) units by object counts; without it the root ' +
            'behaves as in KusionStack (consecutive bucket runs in its own cluster).',
        },
      ),
    ),
  },
  closed,
);

export const ShardingConfigSpecSchema = Type.Object(
  {
    selector: Type.Optional(LabelSelectorSchema),
    controller: Type.Optional(
      Type.Object(
        {
          leaderElectionName: Type.String(),
          multicluster: Type.Optional(
            Type.Boolean({
              description:
                'ControllerMesh extension: the operator handles objects of clusters other than the one its pods run in.',
            }),
          ),
        },
        closed,
      ),
    ),
    webhook: Type.Optional(
      Type.Object({ certDir: Type.String(), port: Type.Integer({ minimum: 1, maximum: 65535 }) }, closed),
    ),
    limits: Type.Optional(Type.Array(LimitSchema)),
    root: Type.Optional(RootSchema),
    objectSharding: Type.Optional(
      Type.Array(ResourceGroupSchema, {
        description:
          'ControllerMesh extension: resources whose objects are sharded one by one, by the hash of their uid, instead ' +
          'of by namespace, so one namespace\'s objects spread over the shards. The API server filters lists and ' +
          'watches by uid range where it offers shard selectors (Kubernetes 1.36+); elsewhere the proxy filters them. ' +
          'Reads of one object are judged from the answer and writes after a read of the object (docs/shard-selectors.md).',
      }),
    ),
    unshardedWrites: Type.Optional(
      Type.Array(ResourceGroupSchema, {
        description:
          'ControllerMesh extension: resources whose objects belong to no bucket that this operator\'s shards may still ' +
          'write through the proxy: cluster-scoped built-in resources (ClusterRoles and ClusterRoleBindings, webhook and ' +
          'API service registrations, CustomResourceDefinitions, nodes, persistent volumes, certificate signing requests, ' +
          'storage and priority classes, ...) and token minting (resource `serviceaccounts/token`). Without it every shard ' +
          'is refused such writes, since each can grant access to every bucket; naming one lets every shard of the operator ' +
          'write it (docs/proxy.md, "Cluster-scoped objects").',
      }),
    ),
    objectLabels: Type.Optional(
      Type.Union(
        OBJECT_LABELS.map((v) => Type.Literal(v)),
        {
          description:
            'ControllerMesh extension: whether the agent writes the sharding labels on namespaces and on the objects of ' +
            'the resources the limits name. Auto (the default): only in clusters whose API server cannot filter by ' +
            'hash range itself (Kubernetes before 1.36, or the ShardedListAndWatch gate off) or when the agents\' hash ' +
            'algorithm is not fnv-range. Always: everywhere, as KusionStack does. Never: nowhere; where the API server cannot ' +
            'filter, the proxy filters lists and watches itself, at the cost of reading every object.',
        },
      ),
    ),
  },
  closed,
);

export const ShardingConfigStatusSchema = Type.Object(
  {
    root: Type.Optional(
      Type.Object({ childShardingConfigs: Type.Optional(Type.Array(Type.String())) }, closed),
    ),
    observedGeneration: Type.Optional(Type.Integer({ minimum: 0 })),
    /** Written by the agent: Accepted (True/False) with the validation message when False. */
    conditions: Type.Optional(Type.Array(ConditionSchema)),
    /** Written by the agent from the hub's route tables: the buckets each shard owns, per cluster. */
    shards: Type.Optional(
      Type.Array(
        Type.Object(
          {
            name: Type.String(),
            version: Type.Integer({ minimum: 0 }),
            clusters: Type.Array(Type.Object({ name: Type.String(), buckets: Type.Array(Type.Integer({ minimum: 0 })) }, closed)),
          },
          closed,
        ),
      ),
    ),
  },
  closed,
);

export type ShardingConfigStatus = Static<typeof ShardingConfigStatusSchema>;
export type ShardingConfigSpec = Static<typeof ShardingConfigSpecSchema>;
export type LimitInput = Static<typeof LimitSchema>;

/** A limit after normalisation: both manifest forms give this. */
export interface ShardLimit {
  relateResources: ResourceGroup[];
  selector: LabelSelector;
}

export interface RootModel {
  disable: boolean;
  prefix: string;
  targetStatefulSet: string;
  canary?: { replicas: number; inNamespaces: string[]; inShardHash: number[] };
  auto?: { shardingSize: number; everyShardReplicas: number };
  resourceSelector: ShardLimit[];
  clusters?: LabelSelector;
}

/** A ShardingConfig as the rest of ControllerMesh uses it: one form for limits, numbers for buckets. */
export interface ShardingConfigModel {
  kind: 'ShardingConfig';
  name: string;
  namespace: string;
  selector: LabelSelector;
  controller?: { leaderElectionName: string; multicluster: boolean };
  webhook?: { certDir: string; port: number };
  limits: ShardLimit[];
  root?: RootModel;
  objectLabels: ObjectLabels;
  /** Resources sharded by object uid rather than by namespace (`spec.objectSharding`). */
  objectSharding: ResourceGroup[];
  /** Unsharded resources the shards may write (`spec.unshardedWrites`). */
  unshardedWrites: ResourceGroup[];
}

function normalizeLimit(limit: LimitInput): ShardLimit {
  const inner = limit.objectSelector ?? limit;
  return { relateResources: inner.relateResources ?? [], selector: inner.selector ?? {} };
}

function normalizeResourceSelector(entry: Static<typeof ResourceSelectorSchema>): ShardLimit {
  if (entry.relateResources || entry.selector) {
    return { relateResources: entry.relateResources ?? [], selector: entry.selector ?? {} };
  }
  return { relateResources: [{ apiGroups: entry.apiGroups ?? [], resources: entry.resources ?? [] }], selector: {} };
}

/** Checks the schema cannot express: one limit form per entry, selector syntax, bucket numbers in range. */
export function shardingConfigProblems(spec: ShardingConfigSpec, bucketCount: number): FieldProblem[] {
  const problems: FieldProblem[] = [];
  if (spec.selector) problems.push(...labelSelectorProblems(spec.selector, 'spec.selector'));
  (spec.limits ?? []).forEach((limit, i) => {
    const at = `spec.limits[${i}]`;
    const direct = limit.relateResources !== undefined || limit.selector !== undefined;
    if (direct && limit.objectSelector) {
      problems.push({ path: at, reason: 'use either relateResources/selector or objectSelector, not both' });
    }
    if (limit.selector) problems.push(...labelSelectorProblems(limit.selector, childPath(at, 'selector')));
    if (limit.objectSelector?.selector) {
      problems.push(...labelSelectorProblems(limit.objectSelector.selector, `${at}.objectSelector.selector`));
    }
  });
  const root = spec.root;
  if (root) {
    (root.resourceSelector ?? []).forEach((entry, i) => {
      const at = `spec.root.resourceSelector[${i}]`;
      const group = entry.apiGroups !== undefined || entry.resources !== undefined;
      const limiter = entry.relateResources !== undefined || entry.selector !== undefined;
      if (group && limiter) problems.push({ path: at, reason: 'use either apiGroups/resources or relateResources/selector, not both' });
      if (!group && !limiter) problems.push({ path: at, reason: 'name the resources: apiGroups and resources' });
      if (entry.selector) problems.push(...labelSelectorProblems(entry.selector, childPath(at, 'selector')));
    });
    (root.canary?.inShardHash ?? []).forEach((h, i) => {
      const n = Number(h);
      if (!Number.isInteger(n) || n < 0 || n >= bucketCount) {
        problems.push({ path: `spec.root.canary.inShardHash[${i}]`, reason: `must be a bucket number from 0 to ${bucketCount - 1}` });
      }
    });
    const pods = (root.canary?.replicas ?? 0) + (root.auto ? root.auto.shardingSize * root.auto.everyShardReplicas : 0);
    if (pods > MAX_ROOT_PODS) {
      problems.push({ path: 'spec.root.auto', reason: `the root places ${pods} pods (canary replicas + shardingSize x everyShardReplicas); at most ${MAX_ROOT_PODS}` });
    }
    if (root.auto) {
      const run = Math.ceil(bucketCount / root.auto.shardingSize);
      if (run * (root.auto.shardingSize - 1) >= bucketCount) {
        problems.push({
          path: 'spec.root.auto.shardingSize',
          reason: `${root.auto.shardingSize} shards of ${run} consecutive buckets leave the last shard without buckets (${bucketCount} buckets); choose fewer shards`,
        });
      }
    }
    if (root.clusters) problems.push(...labelSelectorProblems(root.clusters, 'spec.root.clusters'));
    if (!root.auto && !root.disable) problems.push({ path: 'spec.root.auto', reason: 'a root needs auto (shardingSize, everyShardReplicas)' });
  }
  return problems;
}

export function normalizeShardingConfig(meta: { name: string; namespace?: string }, spec: ShardingConfigSpec): ShardingConfigModel {
  const model: ShardingConfigModel = {
    kind: 'ShardingConfig',
    name: meta.name,
    namespace: meta.namespace ?? 'default',
    selector: spec.selector ?? {},
    limits: (spec.limits ?? []).map(normalizeLimit),
    objectLabels: spec.objectLabels ?? 'Auto',
    objectSharding: spec.objectSharding ?? [],
    unshardedWrites: spec.unshardedWrites ?? [],
  };
  if (spec.controller) {
    model.controller = { leaderElectionName: spec.controller.leaderElectionName, multicluster: spec.controller.multicluster ?? false };
  }
  if (spec.webhook) model.webhook = { ...spec.webhook };
  const root = spec.root;
  if (root) {
    model.root = {
      disable: root.disable ?? false,
      prefix: root.prefix,
      targetStatefulSet: root.targetStatefulSet,
      resourceSelector: (root.resourceSelector ?? []).map(normalizeResourceSelector),
    };
    if (root.canary) {
      model.root.canary = {
        replicas: root.canary.replicas,
        inNamespaces: root.canary.inNamespaces ?? [],
        inShardHash: (root.canary.inShardHash ?? []).map(Number),
      };
    }
    if (root.auto) model.root.auto = { ...root.auto };
    if (root.clusters) model.root.clusters = root.clusters;
  }
  return model;
}
