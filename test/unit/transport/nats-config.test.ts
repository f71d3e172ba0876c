import type { PeerCertificate } from 'node:tls';
import { createUser } from '@nats-io/nkeys';
import { describe, expect, it } from 'vitest';
import { inboxPrefixFor, natsConfigWarnings, serverIdentityCheck } from '../../../src/transport/index.js';

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

describe('the NATS server certificate check', () => {
  // What Node's checkServerIdentity reads of a peer certificate.
  const cert = (altNames: string): PeerCertificate => ({ subject: { CN: 'nats' }, subjectaltname: altNames }) as unknown as PeerCertificate;

  it('checks a server reached by IP against that IP, not against the "localhost" Node falls back to', () => {
    const check = serverIdentityCheck(['tls://10.0.0.10:4222']);
    expect(check('localhost', cert('IP Address:10.0.0.10'))).toBeUndefined();
    expect(check('localhost', cert('DNS:localhost'))).toBeInstanceOf(Error);
    expect(check('localhost', cert('IP Address:10.0.0.11'))).toBeInstanceOf(Error);
  });

  it('checks a named server by its name', () => {
    const check = serverIdentityCheck(['tls://nats.example:4222']);
    expect(check('nats.example', cert('DNS:nats.example'))).toBeUndefined();
    expect(check('nats.example', cert('DNS:other.example'))).toBeInstanceOf(Error);
  });
});
