import { createServer, fromSeed } from '@nats-io/nkeys';
import { describe, expect, it } from 'vitest';
import { ed25519Signer, ed25519Verify } from '../../../src/transport/ed25519.js';
import { RouteTableKind, RouteTableSchema, encodeMessage, openRouteTable, routeSigner } from '../../../src/transport/index.js';
import { routeTableFixture } from '../proxy/route-table-fixture.js';

const seed = (): string => new TextDecoder().decode(createServer().getSeed());
const hub = routeSigner(seed());
const table = routeTableFixture({ version: 7 });

describe('signed route tables', () => {
  it('opens what the trusted key sealed, exactly', () => {
    expect(openRouteTable(hub.seal(RouteTableKind, table), [hub.publicKey])).toEqual({ ok: true, value: table });
  });

  it('refuses another key, a changed byte, an unsigned table and a swapped signer', () => {
    const stranger = routeSigner(seed());
    expect(openRouteTable(stranger.seal(RouteTableKind, table), [hub.publicKey])).toMatchObject({ ok: false, reason: expect.stringMatching(/does not trust/) });
    const sealed = JSON.parse(Buffer.from(hub.seal(RouteTableKind, table)).toString()) as { payload: string; signer: string };
    const tampered = { ...sealed, payload: sealed.payload.replace('"version":7', '"version":8') };
    expect(openRouteTable(Buffer.from(JSON.stringify(tampered)), [hub.publicKey])).toMatchObject({ ok: false, reason: expect.stringMatching(/signature/) });
    // Claiming the trusted signer over a stranger's signature.
    const claimed = { ...(JSON.parse(Buffer.from(stranger.seal(RouteTableKind, table)).toString()) as object), signer: hub.publicKey };
    expect(openRouteTable(Buffer.from(JSON.stringify(claimed)), [hub.publicKey]).ok).toBe(false);
    expect(openRouteTable(encodeMessage({ kind: 'RouteTable', schema: RouteTableSchema }, table), [hub.publicKey]).ok).toBe(false);
  });

  it('without trusted keys still checks the signature against the key it names', () => {
    expect(openRouteTable(routeSigner(seed()).seal(RouteTableKind, table)).ok).toBe(true);
    const sealed = JSON.parse(Buffer.from(hub.seal(RouteTableKind, table)).toString()) as { payload: string };
    expect(openRouteTable(Buffer.from(JSON.stringify({ ...sealed, payload: `${sealed.payload} ` }))).ok).toBe(false);
  });

  it('refuses a seed that is not a server key', () => {
    expect(() => routeSigner('SUAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')).toThrow();
  });
});

describe('ed25519 through node:crypto', () => {
  it('signs what nkeys verifies and verifies what nkeys signs', () => {
    const s = seed();
    const nkey = fromSeed(new TextEncoder().encode(s));
    const data = Buffer.from('route table bytes');
    const signer = ed25519Signer(s);
    expect(signer.publicKey).toBe(nkey.getPublicKey());
    expect(nkey.verify(data, signer.sign(data))).toBe(true);
    expect(ed25519Verify(nkey.getPublicKey(), data, nkey.sign(data))).toBe(true);
    expect(ed25519Verify(nkey.getPublicKey(), Buffer.from('other bytes'), nkey.sign(data))).toBe(false);
    expect(() => ed25519Verify('NOTAKEY', data, nkey.sign(data))).toThrow();
  });
});
