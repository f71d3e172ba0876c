import { Type, type Static } from '@sinclair/typebox';

const closed = { additionalProperties: false } as const;

/** A status condition as the agent writes it (Kubernetes' metav1.Condition shape). */
export const ConditionSchema = Type.Object(
  {
    type: Type.String(),
    status: Type.Union([Type.Literal('True'), Type.Literal('False'), Type.Literal('Unknown')]),
    reason: Type.String(),
    message: Type.String(),
    lastTransitionTime: Type.String(),
    observedGeneration: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  closed,
);

export type Condition = Static<typeof ConditionSchema>;

/**
 * The status fields the agent writes on a CircuitBreaker or FaultInjection: Accepted/Invalid conditions (the message
 * names every field at fault) and which proxies have the rule in force, at which generation and route-table version.
 */
export const RuleStatusFields = {
  observedGeneration: Type.Optional(Type.Integer({ minimum: 0 })),
  conditions: Type.Optional(Type.Array(ConditionSchema)),
  /** From the proxies' acknowledgements: each shard whose proxy applied the rule, with what it applied. */
  proxies: Type.Optional(
    Type.Array(
      Type.Object(
        {
          operator: Type.String(),
          shard: Type.String(),
          pod: Type.String(),
          generation: Type.Integer({ minimum: 0 }),
          tableVersion: Type.Integer({ minimum: 0 }),
        },
        closed,
      ),
    ),
  ),
};
