import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../../src/errors.js';
import { MESSAGE_SCHEMA_VERSION, Messages, decodeMessage, encodeMessage, type Heartbeat } from '../../../src/transport/index.js';

const heartbeat: Heartbeat = {
  schema: MESSAGE_SCHEMA_VERSION,
  cluster: 'a',
  sentAt: '2026-01-01T00:00:00.000Z',
  apiServerReachable: true,
};

describe('message codec', () => {
  it('round-trips a valid message', () => {
    const result = decodeMessage(Messages.heartbeat, encodeMessage(Messages.heartbeat, heartbeat));
    expect(result).toEqual({ ok: true, value: heartbeat });
  });

  it('names the field at fault', () => {
    const bad = Buffer.from(JSON.stringify({ ...heartbeat, sentAt: 'yesterday' }));
    const result = decodeMessage(Messages.heartbeat, bad);
    expect(result.ok).toBe(false);
    expect(!result.ok && result.reason).toMatch(/Heartbeat: \/sentAt/);
  });

  it('refuses an unknown schema version and non-JSON', () => {
    expect(decodeMessage(Messages.heartbeat, Buffer.from(JSON.stringify({ ...heartbeat, schema: 2 }))).ok).toBe(false);
    expect(decodeMessage(Messages.heartbeat, Buffer.from('{oops'))).toMatchObject({ ok: false });
  });

  it('refuses to send an invalid message', () => {
    expect(() => encodeMessage(Messages.heartbeat, { ...heartbeat, cluster: '' })).toThrow(
      expect.objectContaining({ code: ErrorCodes.MESSAGE }),
    );
  });
});
