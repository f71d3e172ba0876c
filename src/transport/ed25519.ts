import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { fromPublic, fromSeed } from '@nats-io/nkeys';
import { InvalidConfigError } from '../errors.js';

/**
 * ed25519 with nkeys' encodings but node:crypto's arithmetic: nkeys signs in pure JavaScript (tens of ms a
 * signature on a loaded machine), node's OpenSSL in about a hundred microseconds. nkeys still parses and checks
 * (prefix, CRC) every key; only the raw 32 bytes are handed over.
 */

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex');
const SPKI_ED25519 = Buffer.from('302a300506032b6570032100', 'hex');

function base32(text: string): Buffer {
  const out: number[] = [];
  let bits = 0;
  let value = 0;
  for (const ch of text) {
    const index = ALPHABET.indexOf(ch);
    if (index < 0) throw new InvalidConfigError('not an nkey: a character outside base32');
    value = (value << 5) | index;
    bits += 5;
    if (bits >= 8) {
      out.push((value >>> (bits - 8)) & 0xff);
      bits -= 8;
    }
  }
  return Buffer.from(out);
}

export interface Ed25519Signer {
  publicKey: string;
  sign(data: Uint8Array): Buffer;
}

/** A signer for an nkey seed (`S...`); the seed is checked by nkeys first. */
export function ed25519Signer(seed: string): Ed25519Signer {
  const trimmed = seed.trim();
  const publicKey = fromSeed(new TextEncoder().encode(trimmed)).getPublicKey();
  // A seed is two prefix bytes, the 32-byte ed25519 seed and a CRC.
  const raw = base32(trimmed).subarray(2, 34);
  const key = createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, raw]), format: 'der', type: 'pkcs8' });
  return { publicKey, sign: (data) => sign(null, data, key) };
}

const publicKeys = new Map<string, KeyObject>();

/** Whether `signature` is `publicKey`'s (an nkey public key, checked by nkeys) over `data`. */
export function ed25519Verify(publicKey: string, data: Uint8Array, signature: Uint8Array): boolean {
  let key = publicKeys.get(publicKey);
  if (!key) {
    fromPublic(publicKey);
    // A public key is one prefix byte, the 32-byte ed25519 key and a CRC.
    key = createPublicKey({ key: Buffer.concat([SPKI_ED25519, base32(publicKey).subarray(1, 33)]), format: 'der', type: 'spki' });
    // Every agent's key, as each hub verifies every cluster's heartbeats (a few hundred bytes a key).
    if (publicKeys.size >= 8192) publicKeys.clear();
    publicKeys.set(publicKey, key);
  }
  return verify(null, data, key, signature);
}
