import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { InvalidConfigError } from '../errors.js';
import { decodeMessage, encodeMessage, encodeMessageText, type DecodeResult } from './codec.js';
import { ed25519Signer, ed25519Verify } from './ed25519.js';
import { Messages, type MessageKind, type RenewReply } from './messages.js';
import { RouteTableSchema, type RouteTable } from './route-table.js';

/**
 * What the hub says to proxies, signed: the exact bytes of a message, signed by the hub's nkey (ed25519). A proxy
 * verifies the signature against the keys it trusts before it reads anything else, so a route table or lease
 * renewal written by anyone else, or altered by a single byte, is never applied or stored.
 */
export const SignedEnvelopeSchema = Type.Object(
  {
    schema: Type.Literal(1),
    /** What the payload is (RouteTable, RenewReply): a signature over one kind is never read as another. */
    kind: Type.String({ minLength: 1 }),
    /** Public nkey of the signer. */
    signer: Type.String({ pattern: '^N[A-Z2-7]{55}$' }),
    /** base64 ed25519 signature of `kind`, a newline and `payload`, as UTF-8. */
    signature: Type.String({ minLength: 1 }),
    /** The message as JSON text. */
    payload: Type.String({ minLength: 2 }),
  },
  { additionalProperties: false },
);

const EnvelopeKind: MessageKind<typeof SignedEnvelopeSchema> = { kind: 'SignedEnvelope', schema: SignedEnvelopeSchema };
export const RouteTableKind: MessageKind<typeof RouteTableSchema> = { kind: 'RouteTable', schema: RouteTableSchema };

const signed = (kind: string, payload: string): Buffer => Buffer.from(`${kind}\n${payload}`, 'utf8');

/** Holds the hub's seed; signs what the hub says to proxies. */
export interface RouteSigner {
  publicKey: string;
  seal<S extends TSchema>(kind: MessageKind<S>, value: Static<S>): Uint8Array;
}

export function routeSigner(seed: string): RouteSigner {
  const key = ed25519Signer(seed);
  if (!key.publicKey.startsWith('N')) throw new InvalidConfigError('the route-table signing key must be a server nkey seed (SN...)');
  return {
    publicKey: key.publicKey,
    seal(kind, value) {
      const payload = encodeMessageText(kind, value);
      const signature = key.sign(signed(kind.kind, payload)).toString('base64');
      return encodeMessage(EnvelopeKind, { schema: 1, kind: kind.kind, signer: key.publicKey, signature, payload });
    },
  };
}

/**
 * Verifies and decodes a sealed message of `kind`. `trusted`: the public keys whose signatures are accepted;
 * without it the signature must still be valid for the key the envelope names (a reader that trusts the bus).
 */
export function openSealed<S extends TSchema>(kind: MessageKind<S>, data: Uint8Array, trusted?: readonly string[]): DecodeResult<Static<S>> {
  const envelope = decodeMessage(EnvelopeKind, data);
  if (!envelope.ok) return envelope;
  const { signer, signature, payload } = envelope.value;
  if (envelope.value.kind !== kind.kind) return { ok: false, reason: `SignedEnvelope: holds a ${envelope.value.kind}, not a ${kind.kind}` };
  if (trusted && !trusted.includes(signer)) return { ok: false, reason: `SignedEnvelope: signed by ${signer}, a key this process does not trust` };
  let valid = false;
  try {
    valid = ed25519Verify(signer, signed(kind.kind, payload), Buffer.from(signature, 'base64'));
  } catch {
    valid = false;
  }
  if (!valid) return { ok: false, reason: `SignedEnvelope: the signature does not match the ${kind.kind} (signer ${signer})` };
  return decodeMessage(kind, Buffer.from(payload, 'utf8'));
}

/** A stored route table, verified and decoded. */
export function openRouteTable(data: Uint8Array, trusted?: readonly string[]): DecodeResult<RouteTable> {
  return openSealed(RouteTableKind, data, trusted);
}

/** A lease renewal, verified and decoded. */
export function openRenewal(data: Uint8Array, trusted: readonly string[]): DecodeResult<RenewReply> {
  return openSealed(Messages.renewReply, data, trusted);
}
