import { Type, type TLiteral, type TUnion } from '@sinclair/typebox';
import { DURATION_PATTERN } from './duration.js';

/** One of a fixed set of strings; becomes `enum` in the CRD and "must be one of ..." in validation errors. */
export function StringEnum<const T extends readonly string[]>(
  values: T,
  options: { description?: string } = {},
): TUnion<TLiteral<T[number]>[]> {
  return Type.Union(
    values.map((v) => Type.Literal(v)),
    options,
  );
}

/** Marks a union that the CRD renders as `x-kubernetes-int-or-string` (the only union a structural schema allows). */
export const INT_OR_STRING = 'x-kubernetes-int-or-string';

/** An integer, or a string holding a number (KusionStack writes `percent: "50"` and `inShardHash: [7]`). */
export function IntOrString(options: { description?: string } = {}) {
  return Type.Union([Type.Integer(), Type.String({ pattern: '^[0-9]+(\\.[0-9]+)?$' })], {
    ...options,
    [INT_OR_STRING]: true,
  });
}

/** A Go duration as KusionStack writes them: `200ms`, `1m`, `1h30m`. */
export function Duration(options: { description?: string } = {}) {
  return Type.String({ pattern: DURATION_PATTERN, ...options });
}

/** A Kubernetes object name (DNS subdomain). */
export function ObjectName(options: { description?: string } = {}) {
  return Type.String({ minLength: 1, maxLength: 253, pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$', ...options });
}

/** The metadata a manifest needs for validation; everything else in metadata is the API server's business. */
export const ManifestMetadataSchema = Type.Object({
  name: ObjectName(),
  namespace: Type.Optional(ObjectName()),
  labels: Type.Optional(Type.Record(Type.String(), Type.String())),
  annotations: Type.Optional(Type.Record(Type.String(), Type.String())),
});
