import { describe, expect, it } from 'vitest';
import { newUserKey } from '../../../src/transport/auth/index.js';
import { PROOF_SKEW_MS, messageProvenAt, proveMessage, signableNonce } from '../../../src/transport/index.js';

const data = new TextEncoder().encode('{"schema":1,"cluster":{"name":"a"}}');
const subject = 'ctrlmesh.register.a';
const now = new Date('2026-01-01T00:00:00Z');

describe('message proofs', () => {
  it("hold for the signer's key over the exact bytes on that subject, and for nothing else", () => {
    const key = newUserKey();
    const proof = proveMessage(key.seed, subject, data, now);
    expect(messageProvenAt(key.publicKey, subject, data, proof, now)).toBe(now.getTime());
    expect(messageProvenAt(newUserKey().publicKey, subject, data, proof, now)).toBeUndefined();
    expect(messageProvenAt(key.publicKey, 'ctrlmesh.report.a', data, proof, now)).toBeUndefined();
    expect(messageProvenAt(key.publicKey, subject, new TextEncoder().encode('{"schema":1,"cluster":{"name":"a"} }'), proof, now)).toBeUndefined();
    const [signedAt, signature] = proof.split(' ') as [string, string];
    const flipped = `${signature.slice(0, 10)}${signature[10] === 'A' ? 'B' : 'A'}${signature.slice(11)}`;
    // A time that is no date: Date.parse gives NaN, which must not pass for "within the skew".
    const noDate = `2026-13-01T00:00:00.000Z ${proveMessage(key.seed, subject, data, now).split(' ')[1]!}`;
    for (const bad of [noDate, undefined, '', signature, `${signedAt} ${flipped}`, `${new Date(now.getTime() + 1).toISOString()} ${signature}`, `${signedAt}  ${signature}`, `${proof} `, `${proof}\n${proof}`, `${proof},${proof}`]) {
      expect(messageProvenAt(key.publicKey, subject, data, bad, now), JSON.stringify(bad)).toBeUndefined();
    }
  });

  it('a proof is no login nonce: the agent signs nonces only as nats-server makes them', () => {
    expect(signableNonce(undefined)).toBe(true);
    expect(signableNonce('ZX0lmwVf2sQxKSg')).toBe(true);
    expect(signableNonce(`CtrlmeshProof\n${subject}\n${now.toISOString()}\n{}`)).toBe(false);
    expect(signableNonce('a'.repeat(65))).toBe(false);
  });

  it("hold only within PROOF_SKEW_MS of the checker's clock: a replay later proves nothing", () => {
    const key = newUserKey();
    const proof = proveMessage(key.seed, subject, data, now);
    expect(messageProvenAt(key.publicKey, subject, data, proof, new Date(now.getTime() + PROOF_SKEW_MS))).toBe(now.getTime());
    expect(messageProvenAt(key.publicKey, subject, data, proof, new Date(now.getTime() + PROOF_SKEW_MS + 1))).toBeUndefined();
    expect(messageProvenAt(key.publicKey, subject, data, proof, new Date(now.getTime() - PROOF_SKEW_MS - 1))).toBeUndefined();
  });
});
