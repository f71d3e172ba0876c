import { Type, type Static } from '@sinclair/typebox';
import { RuleStatusFields } from './conditions.js';
import { duplicateNames, type FieldProblem } from './field-problem.js';
import { LabelSelectorSchema, labelSelectorProblems } from './label-selector.js';
import { Duration, StringEnum } from './schema-types.js';

const closed = { additionalProperties: false } as const;

/** Kubernetes calls a rule applies to; `*` means all in each list. */
export const ResourceRuleSchema = Type.Object(
  {
    apiGroups: Type.Array(Type.String()),
    resources: Type.Array(Type.String()),
    verbs: Type.Array(Type.String()),
    namespaces: Type.Array(Type.String()),
  },
  closed,
);

const RestRuleSchema = Type.Object(
  { url: Type.String({ minLength: 1 }), method: Type.String({ minLength: 1 }) },
  closed,
);

export const TRIGGER_POLICIES = ['Normal', 'LimiterOnly', 'ForceOpened', 'ForceClosed'] as const;
export const RECOVER_POLICIES = ['SleepingWindow', 'Manual'] as const;

const RateLimitingSchema = Type.Object(
  {
    name: Type.String({ minLength: 1 }),
    resourceRules: Type.Optional(Type.Array(ResourceRuleSchema)),
    restRules: Type.Optional(Type.Array(RestRuleSchema)),
    bucket: Type.Object(
      {
        burst: Type.Integer({ minimum: 0 }),
        interval: Duration({ description: 'refill period, e.g. 1s, 1m' }),
        limit: Type.Integer({ minimum: 0, description: 'tokens added per interval' }),
      },
      closed,
    ),
    triggerPolicy: StringEnum(TRIGGER_POLICIES),
    recoverPolicy: Type.Optional(
      Type.Object(
        { type: StringEnum(RECOVER_POLICIES), sleepingWindowSize: Type.Optional(Duration()) },
        closed,
      ),
    ),
    validatePolicy: Type.Optional(StringEnum(['AfterHttpSuccess'] as const)),
    properties: Type.Optional(Type.Record(Type.String(), Type.String())),
  },
  closed,
);

const TrafficInterceptRuleSchema = Type.Object(
  {
    name: Type.String({ minLength: 1 }),
    // KusionStack's Go constants are White/Black; its documents write Whitelist/Blacklist. Both are accepted.
    interceptType: StringEnum(['Whitelist', 'Blacklist', 'White', 'Black'] as const),
    contentType: StringEnum(['Normal', 'Regexp'] as const),
    contents: Type.Array(Type.String()),
    methods: Type.Optional(Type.Array(Type.String())),
  },
  closed,
);

export const CircuitBreakerSpecSchema = Type.Object(
  {
    selector: Type.Optional(LabelSelectorSchema),
    rateLimitings: Type.Optional(Type.Array(RateLimitingSchema)),
    trafficInterceptRules: Type.Optional(Type.Array(TrafficInterceptRuleSchema)),
  },
  closed,
);

export const CircuitBreakerStatusSchema = Type.Object(
  {
    ...RuleStatusFields,
    lastUpdatedTime: Type.Optional(Type.String({ format: 'date-time' })),
    limitingSnapshots: Type.Optional(
      Type.Array(
        Type.Object(
          {
            name: Type.String(),
            endpoint: Type.Optional(Type.String()),
            podName: Type.Optional(Type.String()),
            bucket: Type.Object(
              { availableTokens: Type.Integer({ minimum: 0 }), lastAcquireTimestamp: Type.Integer({ minimum: 0 }) },
              closed,
            ),
            status: StringEnum(['Opened', 'Closed'] as const),
            lastTransitionTime: Type.Optional(Type.String({ format: 'date-time' })),
          },
          closed,
        ),
      ),
    ),
  },
  closed,
);

export type CircuitBreakerSpec = Static<typeof CircuitBreakerSpecSchema>;
export type CircuitBreakerStatus = Static<typeof CircuitBreakerStatusSchema>;

export interface CircuitBreakerModel {
  kind: 'CircuitBreaker';
  name: string;
  namespace: string;
  spec: CircuitBreakerSpec;
}

/** Names unique per list, a rule target per limiting, regular expressions that compile. */
export function circuitBreakerProblems(spec: CircuitBreakerSpec): FieldProblem[] {
  const problems: FieldProblem[] = [];
  if (spec.selector) problems.push(...labelSelectorProblems(spec.selector, 'spec.selector'));
  problems.push(...duplicateNames(spec.rateLimitings ?? [], 'spec.rateLimitings'));
  problems.push(...duplicateNames(spec.trafficInterceptRules ?? [], 'spec.trafficInterceptRules'));
  (spec.rateLimitings ?? []).forEach((rl, i) => {
    if (!rl.resourceRules?.length && !rl.restRules?.length) {
      problems.push({ path: `spec.rateLimitings[${i}]`, reason: 'needs resourceRules or restRules: what does it limit?' });
    }
    if (rl.recoverPolicy?.type === 'SleepingWindow' && rl.recoverPolicy.sleepingWindowSize === undefined) {
      problems.push({ path: `spec.rateLimitings[${i}].recoverPolicy.sleepingWindowSize`, reason: 'SleepingWindow needs sleepingWindowSize, e.g. 5m' });
    }
  });
  (spec.trafficInterceptRules ?? []).forEach((rule, i) => {
    if (rule.contentType !== 'Regexp') return;
    rule.contents.forEach((content, j) => {
      try {
        new RegExp(content);
      } catch (err) {
        problems.push({ path: `spec.trafficInterceptRules[${i}].contents[${j}]`, reason: `not a valid regular expression: ${(err as Error).message}` });
      }
    });
  });
  return problems;
}
