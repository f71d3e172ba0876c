import type { Msg } from '@nats-io/transport-node';
import { headers } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { LatestProofs } from '../../../src/hub/signed-messages.js';
import { newUserKey } from '../../../src/transport/auth/index.js';
import { PROOF_HEADER, proveMessage, type AgentKey } from '../../../src/transport/index.js';

const subject = 'ctrlmesh.heartbeat.a';
const at = (ms: number): Date => new Date(Date.parse('2026-01-01T00:00:00Z') + ms);

/** A message as a subscription hands it over, signed with `seed` at `signedAt` when given. */
function message(data: string, seed?: Uint8Array, signedAt?: Date): Msg {
  const bytes = new TextEncoder().encode(data);
  const h = headers();
  if (seed) h.set(PROOF_HEADER, proveMessage(seed, subject, bytes, signedAt ?? at(0)));
  return { subject, data: bytes, headers: seed ? h : undefined } as unknown as Msg;
}

describe('the messages that count under a cluster identity', () => {
  const key = newUserKey();
  const binding: AgentKey = { schema: 1, cluster: 'a', publicKey: key.publicKey, signs: true, boundAt: at(0).toISOString() };

  it('are any while no key that signs is bound (an agent of an earlier version), and only signed ones after', () => {
    let now = 0;
    const proofs = new LatestProofs(() => at(now).getTime());
    expect(proofs.judge(undefined, message('{}'))).toBe('counts');
    expect(proofs.judge({ ...binding, signs: false }, message('{}'))).toBe('counts');
    expect(proofs.judge(binding, message('{}'))).toBe('unsigned');
    expect(proofs.judge(binding, message('{}', newUserKey().seed))).toBe('unsigned');
    // Removed: no key bound, nothing counts until the token is exchanged again.
    const { publicKey: _, ...keyless } = binding;
    expect(proofs.judge(keyless, message('{}', key.seed))).toBe('unsigned');
    expect(proofs.judge(binding, message('{}', key.seed))).toBe('counts');
    now = 1;
    expect(proofs.judge(binding, message('{}', key.seed, at(1)))).toBe('counts');
  });

  it('each signed later than the last one taken: a replayed or older proof counts not, per cluster', () => {
    const proofs = new LatestProofs(() => at(1_000).getTime());
    const first = message('{"n":1}', key.seed, at(10));
    expect(proofs.judge(binding, first)).toBe('counts');
    expect(proofs.judge(binding, first)).toBe('replayed');
    expect(proofs.judge(binding, message('{"n":0}', key.seed, at(5)))).toBe('replayed');
    expect(proofs.judge(binding, message('{"n":2}', key.seed, at(11)))).toBe('counts');
    const other = newUserKey();
    expect(proofs.judge({ ...binding, cluster: 'b', publicKey: other.publicKey }, message('{"n":0}', other.seed, at(5)))).toBe('counts');
  });
});
