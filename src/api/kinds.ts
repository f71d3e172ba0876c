import { Type, type TObject, type TSchema } from '@sinclair/typebox';
import { CircuitBreakerSpecSchema, CircuitBreakerStatusSchema, circuitBreakerProblems, type CircuitBreakerModel, type CircuitBreakerSpec } from './circuit-breaker.js';
import { FaultInjectionSpecSchema, FaultInjectionStatusSchema, faultInjectionProblems, type FaultInjectionModel, type FaultInjectionSpec } from './fault-injection.js';
import type { FieldProblem } from './field-problem.js';
import { ManifestMetadataSchema } from './schema-types.js';
import {
  ShardingConfigSpecSchema,
  ShardingConfigStatusSchema,
  normalizeShardingConfig,
  shardingConfigProblems,
  type ShardingConfigModel,
  type ShardingConfigSpec,
} from './sharding-config.js';

export const API_GROUP = 'ctrlmesh.kusionstack.io';
export const API_VERSION = `${API_GROUP}/v1alpha1`;

export type ManifestModel = ShardingConfigModel | CircuitBreakerModel | FaultInjectionModel;

export interface PrinterColumn {
  name: string;
  type: 'string' | 'integer' | 'boolean' | 'date';
  jsonPath: string;
  description?: string;
}

/** Everything about one kind: the single source its validation and its CRD are both derived from. */
export interface KindDefinition {
  kind: ManifestModel['kind'];
  plural: string;
  shortNames: string[];
  spec: TObject;
  status: TObject;
  printerColumns: PrinterColumn[];
  /** The whole manifest as validation sees it. */
  manifest: TObject;
  /** Checks the schema cannot express; called only once the manifest has the right shape. */
  problems(spec: unknown, options: { bucketCount: number }): FieldProblem[];
  normalize(meta: { name: string; namespace?: string }, spec: unknown): ManifestModel;
}

function manifestSchema(kind: string, spec: TSchema, status: TSchema): TObject {
  return Type.Object({
    apiVersion: Type.Literal(API_VERSION),
    kind: Type.Literal(kind),
    metadata: ManifestMetadataSchema,
    spec,
    status: Type.Optional(status),
  });
}

const AGE: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

export const KINDS: readonly KindDefinition[] = [
  {
    kind: 'ShardingConfig',
    plural: 'shardingconfigs',
    shortNames: ['shard'],
    spec: ShardingConfigSpecSchema,
    status: ShardingConfigStatusSchema,
    printerColumns: [
      { name: 'Leader', type: 'string', jsonPath: '.spec.controller.leaderElectionName', description: 'leader election lock name' },
      { name: 'Root', type: 'string', jsonPath: '.spec.root.prefix', description: 'prefix of the children, for an auto-sharding root' },
      { name: 'Multicluster', type: 'boolean', jsonPath: '.spec.controller.multicluster' },
      AGE,
    ],
    manifest: manifestSchema('ShardingConfig', ShardingConfigSpecSchema, ShardingConfigStatusSchema),
    problems: (spec, { bucketCount }) => shardingConfigProblems(spec as ShardingConfigSpec, bucketCount),
    normalize: (meta, spec) => normalizeShardingConfig(meta, spec as ShardingConfigSpec),
  },
  {
    kind: 'CircuitBreaker',
    plural: 'circuitbreakers',
    shortNames: ['cbk'],
    spec: CircuitBreakerSpecSchema,
    status: CircuitBreakerStatusSchema,
    printerColumns: [AGE],
    manifest: manifestSchema('CircuitBreaker', CircuitBreakerSpecSchema, CircuitBreakerStatusSchema),
    problems: (spec) => circuitBreakerProblems(spec as CircuitBreakerSpec),
    normalize: (meta, spec) => ({ kind: 'CircuitBreaker', name: meta.name, namespace: meta.namespace ?? 'default', spec: spec as CircuitBreakerSpec }),
  },
  {
    kind: 'FaultInjection',
    plural: 'faultinjections',
    shortNames: ['fj'],
    spec: FaultInjectionSpecSchema,
    status: FaultInjectionStatusSchema,
    printerColumns: [{ name: 'Disabled', type: 'boolean', jsonPath: '.spec.disabled' }, AGE],
    manifest: manifestSchema('FaultInjection', FaultInjectionSpecSchema, FaultInjectionStatusSchema),
    problems: (spec) => faultInjectionProblems(spec as FaultInjectionSpec),
    normalize: (meta, spec) => ({ kind: 'FaultInjection', name: meta.name, namespace: meta.namespace ?? 'default', spec: spec as FaultInjectionSpec }),
  },
];
