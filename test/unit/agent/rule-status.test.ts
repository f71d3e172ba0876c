import { describe, expect, it } from 'vitest';
import { ruleStatus } from '../../../src/agent/rule-status.js';
import { statusChanged } from '../../../src/agent/sharding-status.js';
import { validateManifest } from '../../../src/api/index.js';
import { MESSAGE_SCHEMA_VERSION, type Ack } from '../../../src/transport/index.js';

const t0 = new Date('2026-01-01T00:00:00Z');
const t1 = new Date('2026-01-01T00:05:00Z');
const manifest = (spec: unknown) => ({ apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1', kind: 'FaultInjection', metadata: { name: 'faults', namespace: 'ops' }, spec });
const ack = (shard: string, version: number, rules: Ack['rules'], from?: string): Ack => ({
  schema: MESSAGE_SCHEMA_VERSION,
  operator: 'ops/demo',
  shard,
  version,
  ackedAt: t0.toISOString(),
  ...(from ? { from } : {}),
  ...(rules ? { rules } : {}),
});
const mine = (generation: number) => ({ kind: 'FaultInjection' as const, namespace: 'ops', name: 'faults', generation });

describe('ruleStatus', () => {
  const base = { kind: 'FaultInjection' as const, namespace: 'ops', name: 'faults', generation: 3, previous: undefined, now: t0 };

  it('accepts a valid rule and lists the proxies that applied it, with the generation and table version', () => {
    const acks = [
      ack('a/demo-2', 11, [mine(3)], 'demo-2'),
      ack('a/demo-1', 10, [{ ...mine(2) }, { kind: 'CircuitBreaker', namespace: 'ops', name: 'faults', generation: 9 }], 'demo-1'),
      ack('a/demo-3', 12, undefined, 'demo-3'),
      ack('a/demo-4', 12, [{ ...mine(3), name: 'other' }], 'demo-4'),
    ];
    const status = ruleStatus({ ...base, validation: validateManifest(manifest({ httpFault: [] })), acks });
    expect(status.observedGeneration).toBe(3);
    expect(status.conditions.find((c) => c.type === 'Accepted')).toMatchObject({ status: 'True', reason: 'Valid', lastTransitionTime: t0.toISOString(), observedGeneration: 3 });
    expect(status.conditions.find((c) => c.type === 'Invalid')?.status).toBe('False');
    expect(status.proxies).toEqual([
      { operator: 'ops/demo', shard: 'a/demo-1', pod: 'demo-1', generation: 2, tableVersion: 10 },
      { operator: 'ops/demo', shard: 'a/demo-2', pod: 'demo-2', generation: 3, tableVersion: 11 },
    ]);
    // Unchanged later: same status (transition time kept), nothing to write.
    const again = ruleStatus({ ...base, validation: validateManifest(manifest({ httpFault: [] })), acks, previous: status, now: t1 });
    expect(again).toEqual(status);
    expect(statusChanged(JSON.parse(JSON.stringify(status)), again)).toBe(false);
  });

  it('names every field at fault of an invalid rule', () => {
    const validation = validateManifest(manifest({ httpFault: [{ name: 'x', delay: { fixedDelay: '1s', percent: '150' }, match: { httpMatch: [{ path: { regex: '(' } }] } }] }));
    const status = ruleStatus({ ...base, validation, acks: [] });
    const invalid = status.conditions.find((c) => c.type === 'Invalid');
    expect(invalid).toMatchObject({ status: 'True', reason: 'Invalid' });
    expect(invalid?.message).toContain('spec.httpFault[0].delay.percent: must be from 0 to 100');
    expect(invalid?.message).toContain('spec.httpFault[0].match.httpMatch[0].path.regex: not a valid regular expression');
    expect(status.conditions.find((c) => c.type === 'Accepted')?.status).toBe('False');
    expect(status.proxies).toEqual([]);
  });
});
