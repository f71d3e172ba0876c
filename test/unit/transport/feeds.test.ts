import { describe, expect, it } from 'vitest';
import { feedConsumer, feedTarget } from '../../../src/transport/feed-server.js';
import { Buckets, Keys, Subjects } from '../../../src/transport/index.js';

/** NATS subject matching: `*` one token, `>` one or more trailing tokens. */
function matches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (s[i] === undefined || (p[i] !== '*' && p[i] !== s[i])) return false;
  }
  return p.length === s.length;
}

describe('feeds', () => {
  it("a proxy's watch subject opens its own table's feed and nothing else", () => {
    const watch = Subjects.watchShard('ns/op', 'a.b/s1');
    expect(feedTarget(watch, 'routes')).toEqual({ bucket: Buckets.routes, filter: `$KV.${Buckets.routes}.${Keys.route('ns/op', 'a.b/s1')}` });
    expect(feedTarget(watch, 'acks')).toBeUndefined();
  });

  it("an agent's watch subject opens every table's feed and the stored acknowledgements'", () => {
    const watch = Subjects.watchCluster('a.b');
    expect(feedTarget(watch, 'routes')).toEqual({ bucket: Buckets.routes, filter: `$KV.${Buckets.routes}.>` });
    expect(feedTarget(watch, 'acks')).toEqual({ bucket: Buckets.state, filter: `$KV.${Buckets.state}.${Keys.ackAll}` });
  });

  it('a subject no identity is given opens nothing', () => {
    for (const subject of ['ctrlmesh.watch.shard.op', 'ctrlmesh.watch.shard.op.s.x', 'ctrlmesh.watch.cluster', 'ctrlmesh.watch.cluster.a.b', 'ctrlmesh.watch.other.a', 'ctrlmesh.watch.cluster.a=zz', 'other.watch.cluster.a']) {
      expect(feedTarget(subject, 'routes'), subject).toBeUndefined();
      expect(feedTarget(subject, 'acks'), subject).toBeUndefined();
    }
  });

  it("a feed is delivered where its requester alone may read: under its own watch subject's feeds, no other's", () => {
    const mine = Subjects.watchShard('ns/op', 's1');
    const feed = Subjects.feed(mine, 'abcdefgh1');
    expect(matches(Subjects.feedsOf(mine), feed)).toBe(true);
    for (const other of [Subjects.watchShard('ns/op', 's2'), Subjects.watchShard('ns/op2', 's1'), Subjects.watchCluster('s1')]) {
      expect(matches(Subjects.feedsOf(other), feed), other).toBe(false);
    }
  });

  it('a feed resumes at the revision asked only in the stream it was seen in; otherwise it starts from the current values', () => {
    const request = { schema: 1 as const, feed: 'routes' as const, id: 'abcdefgh1', from: { revision: 42, streamCreated: 'then' } };
    expect(feedConsumer('d', 'f', request, 'then', 2_000)).toMatchObject({ deliver_subject: 'd', filter_subject: 'f', deliver_policy: 'by_start_sequence', opt_start_seq: 42, ack_policy: 'none' });
    expect(feedConsumer('d', 'f', request, 'now', 2_000)).toMatchObject({ deliver_policy: 'last_per_subject' });
    expect(feedConsumer('d', 'f', request, 'now', 2_000)).not.toHaveProperty('opt_start_seq');
  });
});
