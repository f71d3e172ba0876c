import { describe, expect, it } from 'vitest';
import { CircuitRules } from '../../../src/proxy/rules/circuit-rules.js';
import { FaultRules, inEffectiveTime } from '../../../src/proxy/rules/fault-rules.js';
import type { ResourceCall, RestCall } from '../../../src/proxy/rules/matchers.js';
import { TokenBucket } from '../../../src/proxy/rules/token-bucket.js';

const podDelete: ResourceCall = { kind: 'resource', verb: 'delete', group: '', resource: 'pods', namespace: 'ns-a' };
const post = (url: string): RestCall => ({ kind: 'rest', method: 'POST', host: new URL(url).hostname, path: new URL(url).pathname, url });

describe('token buckets', () => {
  it('starts full, refills at limit per interval, caps at burst', () => {
    const bucket = new TokenBucket({ burst: 2, limit: 1, intervalMs: 1000, now: 0 });
    expect([bucket.take(0), bucket.take(0), bucket.take(0)]).toEqual([true, true, false]);
    expect(bucket.msUntilToken(0)).toBe(1000);
    expect(bucket.take(999)).toBe(false);
    expect(bucket.take(2000)).toBe(true);
    expect(bucket.take(100_000) && bucket.take(100_000) && !bucket.take(100_000)).toBe(true);
  });
});

describe('CircuitRules', () => {
  const bucket = { burst: 2, interval: '1m', limit: 2 };
  const rule = (name: string, triggerPolicy: 'Normal' | 'LimiterOnly' | 'ForceOpened' | 'ForceClosed', extra: object = {}) => ({
    name,
    resourceRules: [{ apiGroups: [''], resources: ['pods'], verbs: ['delete'], namespaces: ['*'] }],
    bucket,
    triggerPolicy,
    ...extra,
  });

  it('LimiterOnly answers 429 with Retry-After once the bucket is empty', () => {
    const rules = new CircuitRules([{ rateLimitings: [rule('deletes', 'LimiterOnly')] }], 0);
    expect(rules.check(podDelete, 0).action).toBe('allow');
    expect(rules.check(podDelete, 0).action).toBe('allow');
    expect(rules.check(podDelete, 0)).toMatchObject({ action: 'deny', code: 429, cause: 'rate-limited', retryAfterSeconds: 30 });
    expect(rules.check(podDelete, 30_000).action).toBe('allow');
  });

  it('Normal opens on exhaustion (417) and recovers after the sleeping window; Manual stays open', () => {
    const sleeping = new CircuitRules([{ rateLimitings: [rule('d', 'Normal', { recoverPolicy: { type: 'SleepingWindow', sleepingWindowSize: '5m' } })] }], 0);
    sleeping.check(podDelete, 0);
    sleeping.check(podDelete, 0);
    expect(sleeping.check(podDelete, 0)).toMatchObject({ code: 417, cause: 'open', retryAfterSeconds: 300 });
    expect(sleeping.check(podDelete, 299_000)).toMatchObject({ code: 417 });
    expect(sleeping.check(podDelete, 300_001).action).toBe('allow');
    const manual = new CircuitRules([{ rateLimitings: [rule('d', 'Normal', { recoverPolicy: { type: 'Manual' } })] }], 0);
    for (let i = 0; i < 3; i++) manual.check(podDelete, 0);
    expect(manual.check(podDelete, 86_400_000)).toMatchObject({ code: 417 });
  });

  it('ForceOpened denies, ForceClosed allows, and the most specific rule wins', () => {
    expect(new CircuitRules([{ rateLimitings: [rule('f', 'ForceOpened')] }], 0).check(podDelete, 0)).toMatchObject({ code: 417 });
    const wide = { ...rule('wide', 'ForceOpened'), resourceRules: [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'], namespaces: ['*'] }] };
    const narrow = { ...rule('narrow', 'ForceClosed'), resourceRules: [{ apiGroups: [''], resources: ['pods'], verbs: ['delete'], namespaces: ['ns-a'] }] };
    const rules = new CircuitRules([{ rateLimitings: [wide, narrow] }], 0);
    expect(rules.check(podDelete, 0).action).toBe('allow');
    expect(rules.check({ ...podDelete, namespace: 'ns-b' }, 0)).toMatchObject({ code: 417, rule: 'wide' });
  });

  it('intercepts REST calls by blacklist/whitelist, regexp or glob, per method', () => {
    const rules = new CircuitRules(
      [{ trafficInterceptRules: [{ name: 'no-prod-writes', interceptType: 'Blacklist', contentType: 'Regexp', contents: ['^https://prod\\..*'], methods: ['POST', 'PUT', 'DELETE'] }] }],
      0,
    );
    expect(rules.check(post('https://prod.example/x'), 0)).toMatchObject({ code: 403, cause: 'intercepted', rule: 'no-prod-writes' });
    expect(rules.check({ ...post('https://prod.example/x'), method: 'GET' }, 0).action).toBe('allow');
    expect(rules.check(post('https://staging.example/x'), 0).action).toBe('allow');
    const white = new CircuitRules([{ trafficInterceptRules: [{ name: 'only', interceptType: 'Whitelist', contentType: 'Normal', contents: ['http://ok.example/*'] }] }], 0);
    expect(white.check(post('http://ok.example/a'), 0).action).toBe('allow');
    expect(white.check(post('http://other.example/a'), 0)).toMatchObject({ code: 403 });
  });
});

describe('FaultRules', () => {
  const faults = new FaultRules([
    {
      httpFault: [
        { name: 'slow', delay: { fixedDelay: '200ms', percent: '50' }, match: { resources: [{ apiGroups: [''], resources: ['pods'], verbs: ['update', 'patch'], namespaces: ['ns-a'] }] } },
        { name: 'slow2', delay: { fixedDelay: '100ms', percent: 100 } },
        { name: 'abort1', abort: { httpStatus: 503, percent: 100 } },
        { name: 'abort2', abort: { httpStatus: 500, percent: 100 } },
      ],
    },
  ]);
  const patch: ResourceCall = { kind: 'resource', verb: 'patch', group: '', resource: 'pods', namespace: 'ns-a' };

  it('adds delays up, first abort wins, percent rolled per rule with the given random source', () => {
    const low = faults.plan(patch, new Date(0), () => 0.1);
    expect(low).toEqual({ delayMs: 300, delayedBy: ['slow', 'slow2'], abort: { rule: 'abort1', httpStatus: 503 } });
    const high = faults.plan(patch, new Date(0), () => 0.6);
    expect(high.delayMs).toBe(100);
    expect(faults.plan({ ...patch, namespace: 'ns-b' }, new Date(0), () => 0).delayedBy).toEqual(['slow2']);
  });

  it('honours the effective time window (UTC), days of week included', () => {
    const window = { startTime: '09:00:00', endTime: '18:00:00', daysOfWeek: [1, 2, 3, 4, 5] };
    expect(inEffectiveTime(window, new Date('2026-11-20T10:00:00Z'))).toBe(true); // Friday
    expect(inEffectiveTime(window, new Date('2026-11-20T18:00:00Z'))).toBe(false);
    expect(inEffectiveTime(window, new Date('2026-11-21T10:00:00Z'))).toBe(false); // Saturday
    expect(inEffectiveTime({ startTime: '22:00:00', endTime: '02:00:00' }, new Date('2026-11-21T01:00:00Z'))).toBe(true);
  });

  it('matches external calls by host and method', () => {
    const ext = new FaultRules([
      { httpFault: [{ name: 'flaky', abort: { httpStatus: 503, percent: '10' }, match: { httpMatch: [{ host: { exact: 'payments.example.internal' }, method: 'POST' }] } }] },
    ]);
    expect(ext.plan(post('https://payments.example.internal/v1/pay'), new Date(0), () => 0.05).abort).toEqual({ rule: 'flaky', httpStatus: 503 });
    expect(ext.plan(post('https://payments.example.internal/v1/pay'), new Date(0), () => 0.5).abort).toBeUndefined();
    expect(ext.plan({ ...post('https://payments.example.internal/v1/pay'), method: 'GET' }, new Date(0), () => 0).abort).toBeUndefined();
  });
});

describe('FaultRules in KusionStack\'s Go field names', () => {
  it('matches relatedResources and restRules like resources and httpMatch', () => {
    const faults = new FaultRules([
      {
        httpFault: [
          { name: 'go-resources', abort: { httpStatus: 500, percent: 100 }, match: { relatedResources: [{ resources: ['pods'], verbs: ['delete'] }] } },
          { name: 'go-rest', delay: { fixedDelay: '1s', percent: 100 }, match: { restRules: [{ url: ['https://api.example/*'], method: ['GET'] }] } },
        ],
      },
    ]);
    expect(faults.plan(podDelete, new Date(0), () => 0).abort).toEqual({ rule: 'go-resources', httpStatus: 500 });
    const get: RestCall = { kind: 'rest', method: 'GET', host: 'api.example', path: '/v1', url: 'https://api.example/v1' };
    expect(faults.plan(get, new Date(0), () => 0)).toMatchObject({ delayMs: 1000, abort: undefined });
    expect(faults.plan({ ...get, method: 'POST' }, new Date(0), () => 0).delayMs).toBe(0);
  });
});
