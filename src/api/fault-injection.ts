import { Type, type Static } from '@sinclair/typebox';
import { RuleStatusFields } from './conditions.js';
import { duplicateNames, type FieldProblem } from './field-problem.js';
import { LabelSelectorSchema, labelSelectorProblems } from './label-selector.js';
import { Duration, IntOrString } from './schema-types.js';

const closed = { additionalProperties: false } as const;

const Percent = () => IntOrString({ description: 'share of matching requests, 0-100 (a number or a numeric string)' });

const StringMatchSchema = Type.Object(
  { exact: Type.Optional(Type.String()), prefix: Type.Optional(Type.String()), regex: Type.Optional(Type.String()) },
  closed,
);

const ResourceMatchSchema = Type.Object(
  {
    apiGroups: Type.Optional(Type.Array(Type.String())),
    resources: Type.Optional(Type.Array(Type.String())),
    verbs: Type.Optional(Type.Array(Type.String())),
    namespaces: Type.Optional(Type.Array(Type.String())),
  },
  closed,
);

const HttpFaultSchema = Type.Object(
  {
    name: Type.String({ minLength: 1 }),
    delay: Type.Optional(Type.Object({ fixedDelay: Duration(), percent: Percent() }, closed)),
    abort: Type.Optional(
      Type.Object({ httpStatus: Type.Integer({ minimum: 100, maximum: 599 }), percent: Percent() }, closed),
    ),
    match: Type.Optional(
      Type.Object(
        {
          resources: Type.Optional(Type.Array(ResourceMatchSchema)),
          // KusionStack's Go type names these two; its documents use resources/httpMatch. Both are accepted.
          relatedResources: Type.Optional(Type.Array(ResourceMatchSchema)),
          restRules: Type.Optional(
            Type.Array(Type.Object({ url: Type.Array(Type.String()), method: Type.Array(Type.String()) }, closed)),
          ),
          httpMatch: Type.Optional(
            Type.Array(
              Type.Object(
                {
                  host: Type.Optional(StringMatchSchema),
                  path: Type.Optional(StringMatchSchema),
                  method: Type.Optional(Type.String()),
                },
                closed,
              ),
            ),
          ),
        },
        closed,
      ),
    ),
    effectiveTime: Type.Optional(
      Type.Object(
        {
          startTime: Type.Optional(Type.String({ pattern: '^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]$' })),
          endTime: Type.Optional(Type.String({ pattern: '^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]$' })),
          daysOfWeek: Type.Optional(Type.Array(Type.Integer({ minimum: 0, maximum: 6 }))),
          daysOfMonth: Type.Optional(Type.Array(Type.Integer({ minimum: 1, maximum: 31 }))),
          months: Type.Optional(Type.Array(Type.Integer({ minimum: 1, maximum: 12 }))),
        },
        closed,
      ),
    ),
  },
  closed,
);

export const FaultInjectionSpecSchema = Type.Object(
  {
    selector: Type.Optional(LabelSelectorSchema),
    disabled: Type.Optional(Type.Boolean()),
    httpFault: Type.Optional(Type.Array(HttpFaultSchema)),
  },
  closed,
);

export const FaultInjectionStatusSchema = Type.Object(
  {
    ...RuleStatusFields,
    lastUpdatedTime: Type.Optional(Type.String({ format: 'date-time' })),
    currentSpecHash: Type.Optional(Type.String()),
  },
  closed,
);

export type FaultInjectionSpec = Static<typeof FaultInjectionSpecSchema>;
export type FaultInjectionStatus = Static<typeof FaultInjectionStatusSchema>;

export interface FaultInjectionModel {
  kind: 'FaultInjection';
  name: string;
  namespace: string;
  spec: FaultInjectionSpec;
}

function percentProblem(value: number | string, path: string): FieldProblem[] {
  const n = Number(value);
  return n >= 0 && n <= 100 ? [] : [{ path, reason: `must be from 0 to 100, not ${JSON.stringify(value)}` }];
}

/** A fault does something (delay or abort), percents are 0-100, regular expressions compile. */
export function faultInjectionProblems(spec: FaultInjectionSpec): FieldProblem[] {
  const problems: FieldProblem[] = [];
  if (spec.selector) problems.push(...labelSelectorProblems(spec.selector, 'spec.selector'));
  problems.push(...duplicateNames(spec.httpFault ?? [], 'spec.httpFault'));
  (spec.httpFault ?? []).forEach((fault, i) => {
    const at = `spec.httpFault[${i}]`;
    if (!fault.delay && !fault.abort) problems.push({ path: at, reason: 'needs delay or abort: what fault does it inject?' });
    if (fault.delay) problems.push(...percentProblem(fault.delay.percent, `${at}.delay.percent`));
    if (fault.abort) problems.push(...percentProblem(fault.abort.percent, `${at}.abort.percent`));
    (fault.match?.httpMatch ?? []).forEach((m, j) => {
      for (const field of ['host', 'path'] as const) {
        const regex = m[field]?.regex;
        if (regex === undefined) continue;
        try {
          new RegExp(regex);
        } catch (err) {
          problems.push({ path: `${at}.match.httpMatch[${j}].${field}.regex`, reason: `not a valid regular expression: ${(err as Error).message}` });
        }
      }
    });
  });
  return problems;
}
