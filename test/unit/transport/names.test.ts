import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Keys, Subjects, decodeToken, encodeToken } from '../../../src/transport/index.js';

describe('encodeToken', () => {
  it('keeps plain names and escapes the rest', () => {
    expect(encodeToken('cluster-a_1')).toBe('cluster-a_1');
    expect(encodeToken('operator-demo/demo-root')).toBe('operator-demo=2Fdemo-root');
    expect(encodeToken('a.b')).toBe('a=2Eb');
    expect(encodeToken('')).toBe('=');
  });

  it('round-trips any string and yields one NATS-safe token', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (name) => {
        const token = encodeToken(name);
        expect(token).toMatch(/^[A-Za-z0-9_=-]+$/);
        expect(decodeToken(token)).toBe(name);
      }),
    );
  });

  it('rejects tokens it cannot have produced', () => {
    expect(decodeToken('a.b')).toBeUndefined();
    expect(decodeToken('=2')).toBeUndefined();
    expect(decodeToken('=41')).toBeUndefined(); // "A" is never escaped
  });

  it('builds keys and subjects from encoded parts', () => {
    expect(Keys.route('ns/op', 'shard.0')).toBe('ns=2Fop.shard=2E0');
    expect(Subjects.ack('ns/op', 's')).toBe('ctrlmesh.ack.ns=2Fop.s');
    expect(Subjects.heartbeat('c.1')).toBe('ctrlmesh.heartbeat.c=2E1');
  });
});
