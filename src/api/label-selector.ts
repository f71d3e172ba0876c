import { Type, type Static } from '@sinclair/typebox';
import { childPath, type FieldProblem } from './field-problem.js';
import { labelKeyProblem, labelValueProblem } from './label-syntax.js';

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

/**
 * What the API server would refuse in a selector beyond its shape: key and value syntax, and values that must be
 * present (In, NotIn) or absent (Exists, DoesNotExist).
 */
export function labelSelectorProblems(selector: LabelSelector, path: string): FieldProblem[] {
  const problems: FieldProblem[] = [];
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    const at = childPath(childPath(path, 'matchLabels'), key);
    const keyProblem = labelKeyProblem(key);
    if (keyProblem) problems.push({ path: at, reason: keyProblem });
    const valueProblem = labelValueProblem(value);
    if (valueProblem) problems.push({ path: at, reason: valueProblem });
  }
  (selector.matchExpressions ?? []).forEach((req, i) => {
    const at = childPath(childPath(path, 'matchExpressions'), i);
    const keyProblem = labelKeyProblem(req.key);
    if (keyProblem) problems.push({ path: childPath(at, 'key'), reason: keyProblem });
    const values = req.values ?? [];
    if ((req.operator === 'In' || req.operator === 'NotIn') && values.length === 0) {
      problems.push({ path: childPath(at, 'values'), reason: `operator ${req.operator} needs at least one value` });
    }
    if ((req.operator === 'Exists' || req.operator === 'DoesNotExist') && values.length > 0) {
      problems.push({ path: childPath(at, 'values'), reason: `operator ${req.operator} takes no values; remove them` });
    }
    values.forEach((v, j) => {
      const valueProblem = labelValueProblem(v);
      if (valueProblem) problems.push({ path: childPath(childPath(at, 'values'), j), reason: valueProblem });
    });
  });
  return problems;
}
