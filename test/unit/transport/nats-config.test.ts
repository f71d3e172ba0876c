import { createUser } from '@nats-io/nkeys';
import { describe, expect, it } from 'vitest';
import { inboxPrefixFor, natsConfigWarnings } from '../../../src/transport/index.js';

describe('NATS client config', () => {
  it('warns of a plain connection to another host, not of loopback or TLS', () => {
    expect(natsConfigWarnings({ servers: ['nats://10.0.0.5:4222'] })).toEqual([expect.stringMatching(/10\.0\.0\.5:4222 is reached without TLS/)]);
    expect(natsConfigWarnings({ servers: ['nats.example:4222'] })).toHaveLength(1);
    expect(natsConfigWarnings({ servers: ['nats://127.0.0.1:4222', 'localhost:4222', 'tls://nats.example:4222'] })).toEqual([]);
    expect(natsConfigWarnings({ servers: ['nats://10.0.0.5:4222'], tls: { caFile: 'ca.crt' } })).toEqual([]);
  });

  it("an identity's inbox carries its public key; an anonymous one keeps NATS's default", () => {
    const user = createUser();
    expect(inboxPrefixFor({ kind: 'jwt', jwt: 'x.y.z', seed: user.getSeed() })).toBe(`_INBOX_${user.getPublicKey()}`);
    expect(inboxPrefixFor(undefined)).toBe('_INBOX');
  });
});
