import type { Msg } from '@nats-io/transport-node';
import { describe, expect, it } from 'vitest';
import { answer } from '../../../src/transport/pubsub.js';
import { replyInboxKey } from '../../../src/transport/index.js';

const KEY = `U${'A'.repeat(55)}`;

describe('answers go to inboxes only', () => {
  it("reads the key an inbox is named by, and refuses every subject that is not a requester's inbox", () => {
    expect(replyInboxKey(`_INBOX_${KEY}.Ab12Cd34Ef56Gh78Ij90Kl.xYz1`)).toBe(KEY);
    expect(replyInboxKey('_INBOX.Ab12Cd34Ef56Gh78Ij90Kl.xYz1')).toBe('');
    expect(replyInboxKey('_INBOX.Ab12Cd34Ef56Gh78Ij90Kl')).toBe('');
    for (const subject of [
      undefined,
      '',
      '$KV.ctrlmesh-state.removed.a',
      '$KV.ctrlmesh-hub.leader',
      '$JS.API.STREAM.PURGE.KV_ctrlmesh-state',
      'ctrlmesh.register',
      '_INBOX',
      '_INBOX.',
      '_INBOX.a.b.c',
      `_INBOX_${KEY}.a.>`,
      '_INBOX.a.*',
      `_INBOX_${KEY.toLowerCase()}.a.b`,
      `_INBOX_${KEY}X.a.b`,
      '_INBOX.a.b\r\nPUB $KV.x 1',
      '_INBOX.a.b ',
      `_INBOX.${'a'.repeat(65)}.b`,
    ]) {
      expect(replyInboxKey(subject)).toBeUndefined();
    }
  });

  it('sends nothing on a subject that is no inbox', () => {
    const sent: string[] = [];
    const msg = (reply: string): Msg => ({ reply, respond: () => sent.push(reply) }) as unknown as Msg;
    answer(msg('_INBOX.Ab12Cd34Ef56Gh78Ij90Kl.xYz1'), new Uint8Array());
    expect(() => answer(msg('$KV.ctrlmesh-hub.leader'), new Uint8Array())).toThrow(/not a requester's inbox/u);
    expect(sent).toEqual(['_INBOX.Ab12Cd34Ef56Gh78Ij90Kl.xYz1']);
  });
});
