import { Type, type Static } from '@sinclair/typebox';

/** A Kubernetes LabelSelectorRequirement (metav1). */
export const LabelSelectorRequirementSchema = Type.Object(
  {
    key: Type.String({ minLength: 1 }),
    operator: Type.Union([Type.Literal('In'), Type.Literal('NotIn'), Type.Literal('Exists'), Type.Literal('DoesNotExist')]),
    values: Type.Optional(Type.Array(Type.String())),
  },
  { additionalProperties: false },
);

/** A Kubernetes LabelSelector (metav1): matchLabels AND every matchExpressions requirement. */
export const LabelSelectorSchema = Type.Object(
  {
    matchLabels: Type.Optional(Type.Record(Type.String(), Type.String())),
    matchExpressions: Type.Optional(Type.Array(LabelSelectorRequirementSchema)),
  },
  { additionalProperties: false },
);

export type LabelSelectorRequirement = Static<typeof LabelSelectorRequirementSchema>;
export type LabelSelector = Static<typeof LabelSelectorSchema>;

/** apiGroups/resources a limit applies to, as in KusionStack's ResourceGroup. */
export const ResourceGroupSchema = Type.Object(
  {
    apiGroups: Type.Array(Type.String()),
    resources: Type.Array(Type.String()),
  },
  { additionalProperties: false },
);
export type ResourceGroup = Static<typeof ResourceGroupSchema>;
