import { describe, expect, it } from 'vitest';
import { newUserKey } from '../../../src/transport/auth/index.js';
import { PROOF_SKEW_MS, proveRegistration, registrationProven, type ClusterIdentity } from '../../../src/transport/index.js';

const cluster: ClusterIdentity = { name: 'a', labels: { zone: 'x', env: 'prod' }, server: 'https://127.0.0.1:1', caPem: 'PEM' };
const now = new Date('2026-01-01T00:00:00Z');

describe('registration proofs', () => {
  it("holds for the signer's key over the cluster as sent, whatever its labels' order, and for nothing else", () => {
    const key = newUserKey();
    const proof = proveRegistration(key.seed, cluster, now);
    expect(registrationProven(key.publicKey, { ...cluster, labels: { env: 'prod', zone: 'x' } }, proof, now)).toBe(true);
    expect(registrationProven(newUserKey().publicKey, cluster, proof, now)).toBe(false);
    for (const changed of [{ server: 'https://evil:1' }, { caPem: 'PEM\n' }, { labels: { env: 'prod' } }, { name: 'b' }]) {
      expect(registrationProven(key.publicKey, { ...cluster, ...changed }, proof, now), JSON.stringify(changed)).toBe(false);
    }
    const [signedAt, signature] = proof.split(' ') as [string, string];
    const flipped = `${signature.slice(0, 10)}${signature[10] === 'A' ? 'B' : 'A'}${signature.slice(11)}`;
    for (const bad of [undefined, '', signature, `${signedAt} ${flipped}`, `${new Date(now.getTime() + 1).toISOString()} ${signature}`, `${signedAt}  ${signature}`, `${proof} `, `${proof}\n${proof}`]) {
      expect(registrationProven(key.publicKey, cluster, bad, now), JSON.stringify(bad)).toBe(false);
    }
  });

  it('holds only within PROOF_SKEW_MS of the checker\'s clock: a replay later changes nothing', () => {
    const key = newUserKey();
    const proof = proveRegistration(key.seed, cluster, now);
    expect(registrationProven(key.publicKey, cluster, proof, new Date(now.getTime() + PROOF_SKEW_MS))).toBe(true);
    expect(registrationProven(key.publicKey, cluster, proof, new Date(now.getTime() + PROOF_SKEW_MS + 1))).toBe(false);
    expect(registrationProven(key.publicKey, cluster, proof, new Date(now.getTime() - PROOF_SKEW_MS - 1))).toBe(false);
  });
});
