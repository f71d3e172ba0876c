import type { TSchema } from '@sinclair/typebox';
import { SchemaError } from '../errors.js';
import { API_GROUP, KINDS, type KindDefinition } from './kinds.js';
import { INT_OR_STRING } from './schema-types.js';

/** A JSON schema node in the subset a structural CRD schema accepts. */
export interface StructuralSchema {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  description?: string;
  properties?: Record<string, StructuralSchema>;
  required?: string[];
  additionalProperties?: StructuralSchema;
  items?: StructuralSchema;
  enum?: string[];
  pattern?: string;
  format?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  'x-kubernetes-int-or-string'?: true;
}

type Json = Record<string, unknown>;

/**
 * TypeBox -> structural openAPIV3Schema. Every node gets a type; unions are only allowed as string enums or
 * int-or-string, so anything else is a programming error caught by the CRD test, not a schema the server prunes.
 */
export function toStructural(schema: TSchema): StructuralSchema {
  const s = schema as Json;
  const out: StructuralSchema = {};
  if (s[INT_OR_STRING]) {
    out[INT_OR_STRING] = true;
  } else if (Array.isArray(s.anyOf)) {
    const consts = (s.anyOf as Json[]).map((o) => o.const);
    if (!consts.every((c) => typeof c === 'string')) throw new SchemaError('only string enums and int-or-string unions are structural');
    out.type = 'string';
    out.enum = consts as string[];
  } else if (typeof s.const === 'string') {
    out.type = 'string';
    out.enum = [s.const];
  } else if (s.type === 'object' && s.patternProperties) {
    out.type = 'object';
    const [valueSchema] = Object.values(s.patternProperties as Record<string, TSchema>);
    if (!valueSchema) throw new SchemaError('a record schema needs a value schema');
    out.additionalProperties = toStructural(valueSchema);
  } else if (s.type === 'object') {
    out.type = 'object';
    out.properties = Object.fromEntries(
      Object.entries((s.properties as Record<string, TSchema> | undefined) ?? {}).map(([k, v]) => [k, toStructural(v)]),
    );
    if (Array.isArray(s.required) && s.required.length > 0) out.required = [...(s.required as string[])];
  } else if (s.type === 'array') {
    out.type = 'array';
    out.items = toStructural(s.items as TSchema);
  } else if (s.type === 'string' || s.type === 'integer' || s.type === 'number' || s.type === 'boolean') {
    out.type = s.type;
    for (const key of ['pattern', 'format', 'minLength', 'maxLength', 'minimum', 'maximum'] as const) {
      if (s[key] !== undefined) (out as Json)[key] = s[key];
    }
  } else {
    throw new SchemaError(`schema node ${JSON.stringify(s)} has no structural equivalent`);
  }
  if (typeof s.description === 'string') out.description = s.description;
  return out;
}

export interface CustomResourceDefinition {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string };
  spec: Json;
}

function crdOf(def: KindDefinition): CustomResourceDefinition {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${def.plural}.${API_GROUP}` },
    spec: {
      group: API_GROUP,
      names: {
        kind: def.kind,
        listKind: `${def.kind}List`,
        plural: def.plural,
        singular: def.kind.toLowerCase(),
        shortNames: def.shortNames,
        categories: ['ctrlmesh'],
      },
      scope: 'Namespaced',
      versions: [
        {
          name: 'v1alpha1',
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: def.printerColumns,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: toStructural(def.spec),
                status: toStructural(def.status),
              },
              required: ['spec'],
            },
          },
        },
      ],
    },
  };
}

/** The CRDs of every ControllerMesh kind, generated from the same TypeBox schemas validation uses. */
export function buildCrds(): CustomResourceDefinition[] {
  return KINDS.map(crdOf);
}
