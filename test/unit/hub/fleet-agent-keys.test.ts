import type { KvEntry } from '@nats-io/kv';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Fleet } from '../../../src/hub/fleet.js';
import { Keys, MESSAGE_SCHEMA_VERSION, Messages, encodeMessage } from '../../../src/transport/index.js';

const logger = pino({ level: 'silent' });
const KEY = `U${'A'.repeat(55)}`;
let revision = 0;
const entry = (key: string, value: Uint8Array, operation: 'PUT' | 'DEL' = 'PUT'): KvEntry => ({ key, value, revision: ++revision, operation }) as KvEntry;
const bound = (cluster: string, publicKey = KEY): Uint8Array =>
  encodeMessage(Messages.agentKey, { schema: MESSAGE_SCHEMA_VERSION, cluster, publicKey, boundAt: '2026-01-01T00:00:00.000Z' });

describe('Fleet: the keys agents are bound to', () => {
  it('reads a binding, and forgets it when deleted, malformed or naming another cluster (the next renewal binds again)', () => {
    const fleet = new Fleet(logger, []);
    fleet.applyStateEntry(entry(Keys.agentKey('a'), bound('a')));
    expect(fleet.agentKeys.get('a')?.publicKey).toBe(KEY);
    for (const gone of [entry(Keys.agentKey('a'), new Uint8Array(), 'DEL'), entry(Keys.agentKey('a'), bound('b')), entry(Keys.agentKey('a'), new TextEncoder().encode('{"schema":1}'))]) {
      fleet.applyStateEntry(entry(Keys.agentKey('a'), bound('a')));
      fleet.applyStateEntry(gone);
      expect(fleet.agentKeys.has('a')).toBe(false);
    }
  });

  it('keeps a binding the leader has just written, and one without a key (a removal wrote it)', () => {
    const fleet = new Fleet(logger, []);
    const binding = { schema: MESSAGE_SCHEMA_VERSION, cluster: 'a', publicKey: KEY, boundAt: '2026-01-01T00:00:00.000Z' } as const;
    fleet.recordAgentKey(binding);
    expect(fleet.agentKeys.get('a')).toEqual(binding);
    fleet.applyStateEntry(entry(Keys.agentKey('a'), encodeMessage(Messages.agentKey, { schema: MESSAGE_SCHEMA_VERSION, cluster: 'a', boundAt: '2026-01-02T00:00:00.000Z' })));
    expect(fleet.agentKeys.get('a')).toMatchObject({ cluster: 'a' });
    expect(fleet.agentKeys.get('a')?.publicKey).toBeUndefined();
  });
});
