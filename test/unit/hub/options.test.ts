import { describe, expect, it } from 'vitest';
import { HUB_DEFAULTS, parseHubOptions, type HubOptions } from '../../../src/hub/index.js';

const valid: HubOptions = {
  ...HUB_DEFAULTS,
  nats: { servers: ['tls://nats.example:4222'], tls: { caFile: '/ca.crt' }, credentials: { kind: 'creds', file: '/hub.creds' } },
  tokens: [{ cluster: 'eu-west-1', token: 'a-token' }],
  signingSeed: `SN${'A'.repeat(56)}`,
  identity: 'hub-0',
};

describe("the hub's options", () => {
  it('come back deeply frozen, as a copy', () => {
    const result = parseHubOptions(valid);
    if (!result.ok) throw new Error(result.problems.join('; '));
    expect(result.options).toEqual(valid);
    expect(Object.isFrozen(result.options.health)).toBe(true);
    expect(Object.isFrozen(result.options.tokens[0])).toBe(true);
    expect(Object.isFrozen(result.options.nats.credentials)).toBe(true);
    expect(Object.isFrozen(valid.tokens)).toBe(false);
  });

  it('serve /status on a loopback address, or beyond it only behind a token', () => {
    const problems = (options: Partial<HubOptions>): string[] => {
      const result = parseHubOptions({ ...valid, ...options });
      return result.ok ? [] : [...result.problems];
    };
    expect(problems({ listen: { host: '127.0.0.1', port: 9464 } })).toEqual([]);
    expect(problems({ listen: { host: '0.0.0.0', port: 9464 }, statusListen: { host: '127.0.0.1', port: 9465 } })).toEqual([]);
    expect(problems({ listen: { host: '0.0.0.0', port: 9464 }, statusListen: { host: '::1', port: 9465 } })).toEqual([]);
    expect(problems({ listen: { host: '0.0.0.0', port: 9464 } })).toEqual([
      '/status would be served on 0.0.0.0:9464 to anyone who reaches it: give status-listen (e.g. 127.0.0.1:9465), or a status token file',
    ]);
    expect(problems({ statusListen: { host: '10.0.0.7', port: 9465 } })).toEqual([
      '/status would be served on 10.0.0.7:9465 to anyone who reaches it: give status-listen a loopback address, or a status token file',
    ]);
    expect(problems({ listen: { host: '0.0.0.0', port: 9464 }, statusToken: 'a'.repeat(32) })).toEqual([]);
    expect(problems({ statusToken: 'short' })).toEqual([expect.stringMatching(/^statusToken: /u)]);
  });

  it('take the fleet\'s hash settings (--hash-algorithm), and refuse a label key that is none', () => {
    const result = parseHubOptions({ ...valid, hash: { algorithm: 'kusionstack' } });
    expect(result.ok && result.options.hash).toEqual({ algorithm: 'kusionstack' });
    const bad = parseHubOptions({ ...valid, hash: { labels: { hash: 'not a key!' } } });
    expect(bad.ok ? [] : bad.problems).toEqual([expect.stringMatching(/^hash: label key for hash: /u)]);
  });

  it('refuse a token file label that is none, naming the cluster', () => {
    const bad = parseHubOptions({ ...valid, tokens: [{ cluster: 'eu-west-1', token: 'a-token', labels: { 'not a key!': 'x' } }] });
    expect(bad.ok ? [] : bad.problems).toEqual([expect.stringMatching(/^token file: cluster eu-west-1, label not a key!=x: /u)]);
  });

  it('refuse a token file cluster that no agent could name, before anything is minted for it', () => {
    // Minting an identity for a name outside Latin-1 fails, and it would fail after the cluster's record was written.
    const bad = parseHubOptions({ ...valid, tokens: [{ cluster: 'ünïcode-☃', token: 'a-token' }, { cluster: 'Upper', token: 'b-token' }] });
    expect(bad.ok ? [] : bad.problems).toEqual([
      expect.stringMatching(/^token file: cluster "ünïcode-☃" must be a lower-case DNS label/u),
      expect.stringMatching(/^token file: cluster "Upper" must be a lower-case DNS label/u),
    ]);
  });

  it('take an operator file whose lines name operators once each, as NAMESPACE/NAME', () => {
    const operators = [{ operator: 'operator-prod/prod', clusters: ['eu-west-1'] }];
    const result = parseHubOptions({ ...valid, operators });
    expect(result.ok && result.options.operators).toEqual(operators);
    const bad = parseHubOptions({ ...valid, operators: [...operators, { operator: 'Prod/x', clusters: ['eu-west-1'] }, { operator: 'operator-prod/prod', clusters: ['eu-west-1', 'eu-west-l'] }] });
    expect(bad.ok ? [] : bad.problems).toEqual([
      'operator file: "Prod/x" is not the NAMESPACE/NAME of a ShardingConfig',
      'operator file: operator-prod/prod lists cluster eu-west-l, which has no line in the token file',
      'operator file: operator-prod/prod is listed twice; give it one line with all its clusters',
    ]);
  });

  it('are checked against the schema, every field at fault named', () => {
    const result = parseHubOptions({ ...valid, signingSeed: `SA${'A'.repeat(56)}`, replicas: 7, leaseTtlMs: 1_000, health: { unknownAfterMs: 15_000 } });
    expect(result.ok ? [] : result.problems).toEqual([
      expect.stringMatching(/^signingSeed: must match/),
      expect.stringMatching(/^replicas: must be one of/),
      'leaseTtlMs: must be at least 2000 and at most 600000, not number 1000',
      'health.offlineAfterMs: is required',
    ]);
  });

  it('then by the rules between fields', () => {
    const result = parseHubOptions({ ...valid, tokens: [], leaseRenewMs: 4_000, health: { unknownAfterMs: 15_000, offlineAfterMs: 15_000 } });
    expect(result.ok ? [] : result.problems).toEqual([
      'no bootstrap token: the token file must hold at least one "CLUSTER TOKEN" line',
      'the lease renew period must be at most half the lease TTL',
      'offline-after must be longer than unknown-after',
    ]);
  });
});
