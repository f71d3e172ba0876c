import { Type } from '@sinclair/typebox';
import { decodeMessage, encodeMessage, type DecodeResult } from './codec.js';
import { ed25519Signer, ed25519Verify } from './ed25519.js';
import type { MessageKind } from './messages.js';
import { RouteTableSchema, type RouteTable } from './route-table.js';

/**
 * A route table as stored in KV: the table's exact bytes, signed by the hub's nkey (ed25519). A proxy verifies the
 * signature against the keys it trusts before it reads anything else, so a table written by anyone else, or
 * altered by a single byte, is never applied or stored.
 */
export const SignedRouteTableSchema = Type.Object(
  {
    schema: Type.Literal(1),
    /** Public nkey of the signer. */
    signer: Type.String({ pattern: '^N[A-Z2-7]{55}$' }),
    /** base64 ed25519 signature of `table`'s UTF-8 bytes. */
    signature: Type.String({ minLength: 1 }),
    /** The RouteTable as JSON text. */
    table: Type.String({ minLength: 2 }),
  },
  { additionalProperties: false },
);

const SignedKind: MessageKind<typeof SignedRouteTableSchema> = { kind: 'SignedRouteTable', schema: SignedRouteTableSchema };
const TableKind: MessageKind<typeof RouteTableSchema> = { kind: 'RouteTable', schema: RouteTableSchema };

/** Holds the hub's seed; signs tables. */
export interface RouteSigner {
  publicKey: string;
  seal(table: RouteTable): Uint8Array;
}

export function routeSigner(seed: string): RouteSigner {
  const key = ed25519Signer(seed);
  const publicKey = key.publicKey;
  if (!publicKey.startsWith('N')) throw new Error('the route-table signing key must be a server nkey seed (SN...)');
  return {
    publicKey,
    seal(table) {
      const text = Buffer.from(encodeMessage(TableKind, table)).toString('utf8');
      const signature = Buffer.from(key.sign(Buffer.from(text, 'utf8'))).toString('base64');
      return encodeMessage(SignedKind, { schema: 1, signer: publicKey, signature, table: text });
    },
  };
}

/**
 * Verifies and decodes a stored table. `trusted`: the public keys whose signatures are accepted; without it the
 * signature must still be valid for the key the envelope names (a reader that trusts the bus's permissions).
 */
export function openRouteTable(data: Uint8Array, trusted?: readonly string[]): DecodeResult<RouteTable> {
  const envelope = decodeMessage(SignedKind, data);
  if (!envelope.ok) return envelope;
  const { signer, signature, table } = envelope.value;
  if (trusted && !trusted.includes(signer)) return { ok: false, reason: `SignedRouteTable: signed by ${signer}, a key this process does not trust` };
  let valid = false;
  try {
    valid = ed25519Verify(signer, Buffer.from(table, 'utf8'), Buffer.from(signature, 'base64'));
  } catch {
    valid = false;
  }
  if (!valid) return { ok: false, reason: `SignedRouteTable: the signature does not match the table (signer ${signer})` };
  return decodeMessage(TableKind, Buffer.from(table, 'utf8'));
}
