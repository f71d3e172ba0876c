import { describe, expect, it } from 'vitest';
import { decideRegistration, tokenAccepted } from '../../../src/hub/registration.js';
import { MESSAGE_SCHEMA_VERSION, type RegisterRequest } from '../../../src/transport/index.js';

const request: RegisterRequest = {
  schema: MESSAGE_SCHEMA_VERSION,
  token: 'secret',
  cluster: { name: 'a', labels: { region: 'x' }, server: 'https://127.0.0.1:1', caPem: 'PEM' },
};
const now = new Date('2026-01-01T00:00:00Z');

describe('registration', () => {
  it('accepts only a listed token', () => {
    expect(tokenAccepted('secret', ['other', 'secret'])).toBe(true);
    expect(tokenAccepted('secre', ['secret'])).toBe(false);
  });

  it('refuses a wrong token, names the cluster and records nothing', () => {
    const d = decideRegistration({ request: { ...request, token: 'nope' }, tokens: ['secret'], existing: undefined, now });
    expect(d.write).toBe('none');
    expect(d.reply.ok).toBe(false);
    expect(d.reply.error).toMatch(/cluster "a" refused.*--token-file/);
  });

  it('records identity without the token, and is idempotent', () => {
    const first = decideRegistration({ request, tokens: ['secret'], existing: undefined, now });
    expect(first.write).toBe('put');
    if (first.write !== 'put') return;
    expect(JSON.stringify(first.record)).not.toContain('secret');
    const again = decideRegistration({ request, tokens: ['secret'], existing: first.record, now: new Date('2026-01-02T00:00:00Z') });
    expect(again.write).toBe('none');
    const moved = decideRegistration({
      request: { ...request, cluster: { ...request.cluster, server: 'https://127.0.0.1:2' } },
      tokens: ['secret'],
      existing: first.record,
      now: new Date('2026-01-02T00:00:00Z'),
    });
    expect(moved.write === 'put' && moved.record.registeredAt).toBe(first.record.registeredAt);
  });
});
