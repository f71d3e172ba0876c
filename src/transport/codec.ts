import { FormatRegistry, type Static, type TSchema } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import type { Logger } from 'pino';
import { CtrlmeshError, ErrorCodes } from '../errors.js';
import type { MessageKind } from './messages.js';

// TypeBox checks formats only through its registry; messages use `date-time`.
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})$/i;
if (!FormatRegistry.Has('date-time')) FormatRegistry.Set('date-time', (v) => DATE_TIME.test(v) && !Number.isNaN(Date.parse(v)));

const compiled = new WeakMap<TSchema, TypeCheck<TSchema>>();
function checker<S extends TSchema>(schema: S): TypeCheck<S> {
  let check = compiled.get(schema);
  if (!check) {
    check = TypeCompiler.Compile(schema);
    compiled.set(schema, check);
  }
  return check as TypeCheck<S>;
}

export type DecodeResult<T> = { ok: true; value: T } | { ok: false; reason: string };

/** Parses JSON bytes and checks them against the schema; the reason names the first fields at fault. */
export function decodeMessage<S extends TSchema>(kind: MessageKind<S>, data: Uint8Array): DecodeResult<Static<S>> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8'));
  } catch (err) {
    return { ok: false, reason: `${kind.kind}: not JSON (${(err as Error).message})` };
  }
  const check = checker(kind.schema);
  if (check.Check(parsed)) return { ok: true, value: parsed };
  const problems = [...check.Errors(parsed)]
    .slice(0, 3)
    .map((e) => `${e.path || '/'}: ${e.message}`)
    .join('; ');
  return { ok: false, reason: `${kind.kind}: ${problems}` };
}

/** Decodes a received message; a malformed one is logged (with where it came from) and yields undefined. */
export function receiveMessage<S extends TSchema>(
  kind: MessageKind<S>,
  data: Uint8Array,
  context: { logger: Logger; source: string },
): Static<S> | undefined {
  const result = decodeMessage(kind, data);
  if (result.ok) return result.value;
  context.logger.warn({ source: context.source, reason: result.reason }, 'dropped a malformed message');
  return undefined;
}

/** Checks a value before sending, so a bug in a sender shows up there rather than in every receiver. */
export function encodeMessage<S extends TSchema>(kind: MessageKind<S>, value: Static<S>): Uint8Array {
  return Buffer.from(encodeMessageText(kind, value), 'utf8');
}

/** `encodeMessage` as JSON text, for a message that travels inside another (a signed envelope's payload). */
export function encodeMessageText<S extends TSchema>(kind: MessageKind<S>, value: Static<S>): string {
  const check = checker(kind.schema);
  if (!check.Check(value)) {
    const first = check.Errors(value).First();
    throw new CtrlmeshError(ErrorCodes.MESSAGE, `refusing to send an invalid ${kind.kind}: ${first?.path ?? '/'}: ${first?.message ?? "invalid"}`);
  }
  return JSON.stringify(value);
}
