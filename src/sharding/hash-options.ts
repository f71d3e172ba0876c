import { Type, type Static } from '@sinclair/typebox';
import { StringEnum } from '../api/index.js';
import { InvalidConfigError } from '../errors.js';
import { createHashSettings, HASH_ALGORITHMS } from './hash.js';

const text = Type.String({ minLength: 1 });

/**
 * How namespaces are hashed and labelled, as a process is told (`createHashSettings` fills the defaults): the agent
 * labels its cluster so, and a hub given them plans with them and drops the reports of agents that label otherwise.
 */
export const HashOptionsSchema = Type.Object(
  {
    algorithm: Type.Optional(StringEnum(HASH_ALGORITHMS)),
    bucketCount: Type.Optional(Type.Integer({ minimum: 1, maximum: 65_536 })),
    labels: Type.Optional(Type.Object({ hash: Type.Optional(text), namespace: Type.Optional(text), control: Type.Optional(text) }, { additionalProperties: false })),
  },
  { additionalProperties: false },
);
export type HashOptions = Static<typeof HashOptionsSchema>;

/** Why hash options cannot be used (a label key that is none), or undefined: one sentence naming the option. */
export function hashOptionsProblem(options: HashOptions): string | undefined {
  try {
    createHashSettings(options);
    return undefined;
  } catch (err) {
    if (err instanceof InvalidConfigError) return `hash: ${err.message}`;
    throw err;
  }
}
