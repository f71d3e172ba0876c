import { describe, expect, it } from 'vitest';
import { decideRegistration, tokenAccepted, type BootstrapToken, type RegistrationDecision } from '../../../src/hub/registration.js';
import { MESSAGE_SCHEMA_VERSION, type AgentKey, type RegisterRequest } from '../../../src/transport/index.js';

const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const request: RegisterRequest = {
  schema: MESSAGE_SCHEMA_VERSION,
  token: 'secret',
  cluster: { name: 'a', labels: { region: 'x' }, server: 'https://127.0.0.1:1', caPem: PEM },
};
const tokens: BootstrapToken[] = [
  { cluster: 'a', token: 'secret' },
  { cluster: 'b', token: 'secret-of-b' },
];
const now = new Date('2026-01-01T00:00:00Z');
const bound = (publicKey?: string, signs = true): AgentKey => ({ schema: MESSAGE_SCHEMA_VERSION, cluster: 'a', ...(publicKey ? { publicKey, signs } : {}), boundAt: now.toISOString() });
const later = new Date('2026-01-02T00:00:00Z');
const elsewhere = { ...request, cluster: { ...request.cluster, server: 'https://127.0.0.1:2' } };

describe('registration', () => {
  it("records the labels the hub's token file gives a cluster, not its agent's (a cluster cannot label itself into others' spans)", () => {
    const labelled: BootstrapToken[] = [{ cluster: 'a', token: 'secret', labels: { env: 'dev' } }];
    const claimed = { ...request, cluster: { ...request.cluster, labels: { env: 'prod' } } };
    const first = decideRegistration({ request: claimed, channel: 'bootstrap', tokens: labelled, existing: undefined, removed: false, requesterKey: undefined, binding: undefined, mints: false, proven: false, now });
    expect(first.write === 'put' && first.record.cluster.labels).toEqual({ env: 'dev' });
    if (first.write !== 'put') throw new Error('not recorded');
    // Under its own identity too, and registering again with the same claim writes nothing.
    const again = decideRegistration({ request: claimed, channel: 'identity', tokens: labelled, existing: first.record, removed: false, requesterKey: undefined, binding: undefined, mints: false, proven: false, now: later });
    expect(again.write).toBe('none');
    // Without labels in the token file, the agent's stand, as before.
    const plain = decideRegistration({ request: claimed, channel: 'bootstrap', tokens, existing: undefined, removed: false, requesterKey: undefined, binding: undefined, mints: false, proven: false, now });
    expect(plain.write === 'put' && plain.record.cluster.labels).toEqual({ env: 'prod' });
  });

  it('under a cluster\'s own identity, mints only for the key whose inbox the request is answered on', () => {
    const key = `U${'A'.repeat(55)}`;
    const other = `U${'B'.repeat(55)}`;
    const renewal = { ...request, publicKey: key };
    expect(decideRegistration({ request: renewal, channel: 'identity', tokens, existing: undefined, removed: false, requesterKey: key, binding: undefined, mints: false, proven: false, now }).reply.ok).toBe(true);
    for (const requesterKey of [other, '', undefined]) {
      const d = decideRegistration({ request: renewal, channel: 'identity', tokens, existing: undefined, removed: false, requesterKey, binding: undefined, mints: false, proven: false, now });
      expect(d).toEqual({ write: 'none', reply: { schema: MESSAGE_SCHEMA_VERSION, ok: false, error: expect.stringMatching(/minted only for that identity's key/u) } });
    }
    // The bootstrap channel's requester is the shared bootstrap identity: the key is the agent's new one.
    expect(decideRegistration({ request: renewal, channel: 'bootstrap', tokens, existing: undefined, removed: false, requesterKey: other, binding: undefined, mints: false, proven: false, now }).reply.ok).toBe(true);
  });

  it("under a cluster's own identity, renews only for the key its token was last exchanged for, and binds that key", () => {
    const key = `U${'A'.repeat(55)}`;
    const bootstrapKey = `U${'B'.repeat(55)}`;
    const next = `U${'C'.repeat(55)}`;
    // The token binds the key it is exchanged for, whoever asks (the shared bootstrap identity does).
    const exchanged = decideRegistration({ request: { ...request, publicKey: key }, channel: 'bootstrap', tokens, existing: undefined, removed: false, requesterKey: bootstrapKey, binding: undefined, mints: false, proven: false, now });
    expect(exchanged).toMatchObject({ reply: { ok: true }, bind: { publicKey: key } });
    // Renewed for that key, binding nothing new.
    const renewal = { ...request, token: undefined, publicKey: key };
    const renewed = decideRegistration({ request: renewal, channel: 'identity', tokens, existing: undefined, removed: false, requesterKey: key, binding: bound(key), mints: true, proven: true, now });
    expect(renewed.reply.ok).toBe(true);
    expect(renewed.bind).toBeUndefined();
    // A copy of the identity asking for the bootstrap key, answered on the bootstrap key's inbox: refused.
    const copied = { ...renewal, publicKey: bootstrapKey };
    expect(decideRegistration({ request: copied, channel: 'identity', tokens, existing: undefined, removed: false, requesterKey: bootstrapKey, binding: bound(key), mints: true, proven: false, now })).toEqual({
      write: 'none',
      reply: { schema: MESSAGE_SCHEMA_VERSION, ok: false, error: expect.stringMatching(/renewed for only the key its bootstrap token was last exchanged for/u) },
    });
    // After a removal no key is bound: even the agent's own key is renewed only once its token is exchanged again.
    // Nor is any registration under its identity accepted, with a key or without (a copy registering it first).
    for (const asItself of [renewal, { ...renewal, publicKey: undefined }]) {
      expect(decideRegistration({ request: asItself, channel: 'identity', tokens, existing: undefined, removed: false, requesterKey: key, binding: bound(), mints: true, proven: false, now }).reply).toMatchObject({
        ok: false,
        error: expect.stringMatching(/no key is bound since it was removed; restart its agent/u),
      });
    }
    expect(decideRegistration({ request: { ...request, publicKey: key }, channel: 'bootstrap', tokens, existing: undefined, removed: false, requesterKey: bootstrapKey, binding: bound(), mints: true, proven: false, now })).toMatchObject({ reply: { ok: true }, bind: { publicKey: key } });
    // With no key bound yet (registered by an earlier version), the first renewal binds its own.
    expect(decideRegistration({ request: renewal, channel: 'identity', tokens, existing: undefined, removed: false, requesterKey: key, binding: undefined, mints: false, proven: false, now })).toMatchObject({ reply: { ok: true }, bind: { publicKey: key } });
    // The token again (the agent restarted with a new key): the new key is bound.
    expect(decideRegistration({ request: { ...request, publicKey: next }, channel: 'bootstrap', tokens, existing: undefined, removed: false, requesterKey: bootstrapKey, binding: bound(key), mints: true, proven: false, now })).toMatchObject({ bind: { publicKey: next } });
    // Without a key, nothing to bind (a re-registration after a reconnection, or a hub that mints nothing).
    expect(decideRegistration({ request: { ...request, token: undefined }, channel: 'identity', tokens, existing: undefined, removed: false, requesterKey: key, binding: bound(key), mints: true, proven: false, now }).bind).toBeUndefined();
  });

  it('refuses a removed cluster on either channel, naming how to readmit it, and records nothing', () => {
    const first = decideRegistration({ request, channel: 'bootstrap', tokens, existing: undefined, removed: false, requesterKey: undefined, binding: undefined, mints: false, proven: false, now });
    if (first.write !== 'put') throw new Error('not recorded');
    for (const channel of ['bootstrap', 'identity'] as const) {
      const d = decideRegistration({ request, channel, tokens, existing: first.record, removed: true, requesterKey: undefined, binding: undefined, mints: false, proven: false, now: later });
      expect(d).toEqual({ write: 'none', reply: { schema: MESSAGE_SCHEMA_VERSION, ok: false, error: expect.stringMatching(/"a" refused: it was removed from the fleet; `ctrlmesh clusters readmit a`/u) } });
    }
  });

  it('accepts a token only for the cluster it is bound to', () => {
    expect(tokenAccepted('secret', 'a', tokens)).toBe(true);
    expect(tokenAccepted('secret-of-b', 'a', tokens)).toBe(false);
    expect(tokenAccepted('secre', 'a', tokens)).toBe(false);
  });

  it("refuses a wrong token or another cluster's, names the cluster and records nothing", () => {
    for (const token of ['nope', 'secret-of-b']) {
      const d = decideRegistration({ request: { ...request, token }, channel: 'bootstrap', tokens, existing: undefined, removed: false, requesterKey: undefined, binding: undefined, mints: false, proven: false, now });
      expect(d.write).toBe('none');
      expect(d.reply.ok).toBe(false);
      expect(d.reply.error).toMatch(/cluster "a" refused.*--token-file/);
    }
    const none = decideRegistration({ request: { schema: 1, cluster: request.cluster }, channel: 'bootstrap', tokens, existing: undefined, removed: false, requesterKey: undefined, binding: undefined, mints: false, proven: false, now });
    expect(none.reply.ok).toBe(false);
  });

  it('refuses an http server or a missing CA', () => {
    for (const cluster of [{ ...request.cluster, server: 'http://127.0.0.1:1' }, { ...request.cluster, caPem: '' }]) {
      const d = decideRegistration({ request: { ...request, cluster }, channel: 'bootstrap', tokens, existing: undefined, removed: false, requesterKey: undefined, binding: undefined, mints: false, proven: false, now });
      expect(d.reply.ok).toBe(false);
      expect(d.write).toBe('none');
    }
  });

  it('records identity without the token, and is idempotent', () => {
    const first = decideRegistration({ request, channel: 'bootstrap', tokens, existing: undefined, removed: false, requesterKey: undefined, binding: undefined, mints: false, proven: false, now });
    expect(first.write).toBe('put');
    if (first.write !== 'put') return;
    expect(JSON.stringify(first.record)).not.toContain('secret');
    expect(decideRegistration({ request, channel: 'bootstrap', tokens, existing: first.record, removed: false, requesterKey: undefined, binding: undefined, mints: false, proven: false, now: later }).write).toBe('none');
  });

  it("under its own identity, changes the record only when signed with the bound key: a copy of the identity cannot", () => {
    const key = `U${'A'.repeat(55)}`;
    const first = decideRegistration({ request, channel: 'bootstrap', tokens, existing: undefined, removed: false, requesterKey: undefined, binding: undefined, mints: false, proven: false, now });
    if (first.write !== 'put') throw new Error('not registered');
    const { token: _token, ...moved } = elsewhere;
    const unsigned = decideRegistration({ request: moved, channel: 'identity', tokens, existing: first.record, removed: false, requesterKey: undefined, binding: bound(key), mints: false, proven: false, now: later });
    expect(unsigned).toMatchObject({ write: 'none', reply: { ok: false, error: expect.stringMatching(/signed with the key its bootstrap token was last exchanged for/u) } });
    // Unchanged, nothing is written and no signature is needed (an agent of an earlier version registers so).
    expect(decideRegistration({ request: { ...request, token: undefined }, channel: 'identity', tokens, existing: first.record, removed: false, requesterKey: undefined, binding: bound(key), mints: false, proven: false, now: later })).toMatchObject({ write: 'none', reply: { ok: true } });
    const signed = decideRegistration({ request: moved, channel: 'identity', tokens, existing: first.record, removed: false, requesterKey: undefined, binding: bound(key), mints: false, proven: true, now: later });
    expect(signed.write === 'put' && signed.record.cluster.server).toBe('https://127.0.0.1:2');
    // Bound for an agent of an earlier version (it proved nothing when bound, and signs nothing): as before.
    const legacy = decideRegistration({ request: moved, channel: 'identity', tokens, existing: first.record, removed: false, requesterKey: undefined, binding: bound(key, false), mints: false, proven: false, now: later });
    expect(legacy.write).toBe('put');
    // The token binds a key and records whether the request proved it holds it.
    const exchange = (proven: boolean): RegistrationDecision => decideRegistration({ request: { ...request, publicKey: key }, channel: 'bootstrap', tokens, existing: first.record, removed: false, requesterKey: undefined, binding: undefined, mints: true, proven, now: later });
    expect(exchange(true).bind).toEqual({ publicKey: key, signs: true });
    expect(exchange(false).bind).toEqual({ publicKey: key, signs: false });
  });

  it('re-points a registered cluster only under its own identity', () => {
    const first = decideRegistration({ request, channel: 'bootstrap', tokens, existing: undefined, removed: false, requesterKey: undefined, binding: undefined, mints: false, proven: false, now });
    if (first.write !== 'put') throw new Error('not registered');
    const byToken = decideRegistration({ request: elsewhere, channel: 'bootstrap', tokens, existing: first.record, removed: false, requesterKey: undefined, binding: undefined, mints: false, proven: false, now: later });
    expect(byToken.write).toBe('none');
    expect(byToken.reply.error).toMatch(/cannot re-point it/);
    // A hub that mints still binds and mints the token's key, re-pointing nothing: the agent re-points under that
    // identity. Refused, a record re-pointed by a copied identity would keep the agent's new key unbound for good.
    const key = `U${'A'.repeat(55)}`;
    const minted = decideRegistration({ request: { ...elsewhere, publicKey: key }, channel: 'bootstrap', tokens, existing: first.record, removed: false, requesterKey: undefined, binding: bound(`U${'B'.repeat(55)}`), mints: true, proven: false, now: later });
    expect(minted).toEqual({ write: 'none', reply: { schema: MESSAGE_SCHEMA_VERSION, ok: true }, bind: { publicKey: key, signs: false } });
    const { token: _token, ...withoutToken } = elsewhere;
    const byIdentity = decideRegistration({ request: withoutToken, channel: 'identity', tokens, existing: first.record, removed: false, requesterKey: undefined, binding: undefined, mints: false, proven: false, now: later });
    expect(byIdentity.write === 'put' && byIdentity.record.cluster.server).toBe('https://127.0.0.1:2');
    expect(byIdentity.write === 'put' && byIdentity.record.registeredAt).toBe(first.record.registeredAt);
  });
});
