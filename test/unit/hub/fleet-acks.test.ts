import type { KvEntry } from '@nats-io/kv';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Fleet } from '../../../src/hub/fleet.js';
import { Keys, MESSAGE_SCHEMA_VERSION, Messages, encodeMessage, type Ack } from '../../../src/transport/index.js';

const logger = pino({ level: 'silent' });

function ackEntry(key: string, ack: Ack, operation: KvEntry['operation'] = 'PUT'): KvEntry {
  return { key, value: encodeMessage(Messages.ack, ack), operation, revision: 1 } as KvEntry;
}

const ack = (version: number, shard = 'op/shard-1'): Ack => ({
  schema: MESSAGE_SCHEMA_VERSION,
  operator: 'ns/op',
  shard,
  version,
  ackedAt: '2026-01-01T00:00:00.000Z',
});

describe('Fleet: acknowledgements stored in KV', () => {
  it('records a stored ack, names its operator only when it is newer, and keeps the highest version', () => {
    const fleet = new Fleet(logger, []);
    expect(fleet.applyStateEntry(ackEntry(Keys.ack('ns/op', 'op/shard-1'), ack(3)))).toBe('ns/op');
    expect(fleet.applyStateEntry(ackEntry(Keys.ack('ns/op', 'op/shard-1'), ack(2)))).toBeUndefined();
    expect(fleet.acks.get('ns/op')?.get('op/shard-1')).toBe(3);
  });

  it('ignores deletions and an ack stored under another shard key', () => {
    const fleet = new Fleet(logger, []);
    expect(fleet.applyStateEntry(ackEntry(Keys.ack('ns/op', 'op/shard-2'), ack(3)))).toBeUndefined();
    expect(fleet.applyStateEntry(ackEntry(Keys.ack('ns/op', 'op/shard-1'), ack(3), 'DEL'))).toBeUndefined();
    expect(fleet.acks.get('ns/op')?.size ?? 0).toBe(0);
  });
});

describe('Fleet: acknowledgements naming cluster rules', () => {
  it('takes the same version again when it names other rules, and not when it repeats them', () => {
    const fleet = new Fleet(logger, []);
    const rule = { kind: 'CircuitBreaker' as const, namespace: 'ns', name: 'b', generation: 1 };
    expect(fleet.recordAck('ns/op', 'a/s1', 7)).toBe(true);
    expect(fleet.recordAck('ns/op', 'a/s1', 7)).toBe(false);
    expect(fleet.recordAck('ns/op', 'a/s1', 7, [rule])).toBe(true);
    expect(fleet.recordAck('ns/op', 'a/s1', 7, [rule])).toBe(false);
    expect(fleet.recordAck('ns/op', 'a/s1', 7, [{ ...rule, generation: 2 }])).toBe(true);
    expect(fleet.recordAck('ns/op', 'a/s1', 7, [])).toBe(true);
    expect(fleet.recordAck('ns/op', 'a/s1', 6, [rule])).toBe(false);
    expect(fleet.acks.get('ns/op')?.get('a/s1')).toBe(7);
  });
});
