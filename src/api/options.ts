import { Type, type Static, type TSchema, type TUnsafe } from '@sinclair/typebox';
import { schemaProblems } from './validate.js';

/**
 * The pieces the processes' option schemas share (src/hub/options.ts, src/agent/options.ts, src/proxy/options.ts)
 * and the one check each of them runs: the schema, then the rules between fields, then a frozen copy.
 */

/** A TCP listener, as `--listen HOST:PORT` gives it; port 0 picks a free one. */
export const ListenAddressSchema = Type.Object({ host: Type.String({ minLength: 1 }), port: Type.Integer({ minimum: 0, maximum: 65535 }) }, { additionalProperties: false });
export type ListenAddress = Static<typeof ListenAddressSchema>;

/** Milliseconds, whole, within [minimum, maximum]: a duration option (its flag reads `500ms`, `15s`, `2m` within that range). */
export function Millis(minimum: number, maximum: number) {
  return Type.Integer({ minimum, maximum });
}

/** A list the options only read: validated as an array, typed `readonly T[]` so a frozen list can be given. */
export function ReadonlyList<T extends TSchema>(item: T, options: { minItems?: number } = {}): TUnsafe<readonly Static<T>[]> {
  return Type.Unsafe<readonly Static<T>[]>(Type.Array(item, options));
}

export type OptionsResult<T> = { ok: true; options: T } | { ok: false; problems: string[] };

/** Plain objects and arrays copied and frozen all the way down; anything else (a handle, bytes) kept as it is. */
function frozenCopy<T>(value: T): T {
  if (Array.isArray(value)) return Object.freeze(value.map(frozenCopy)) as T;
  if (value === null || typeof value !== 'object') return value;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return value;
  return Object.freeze(Object.fromEntries(Object.entries(value).map(([k, v]) => [k, frozenCopy(v)]))) as T;
}

/**
 * Checks a process's options: first against `schema` (every problem at once, `field.path: reason`), then, when the
 * shape is right, by `rules` (the constraints between fields, one sentence each). Usable options come back as a
 * deeply frozen copy.
 */
export function checkOptions<S extends TSchema>(schema: S, input: unknown, rules: (options: Static<S>) => string[]): OptionsResult<Static<S>> {
  const shape = schemaProblems(schema, input).map((p) => `${p.path}: ${p.reason}`);
  if (shape.length > 0) return { ok: false, problems: shape };
  const options = input as Static<S>;
  const problems = rules(options);
  return problems.length > 0 ? { ok: false, problems } : { ok: true, options: frozenCopy(options) };
}
