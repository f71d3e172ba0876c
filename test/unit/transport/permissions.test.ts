import { describe, expect, it } from 'vitest';
import { permissionsFor, type Role } from '../../../src/transport/auth/index.js';
import { Buckets, Keys, Subjects } from '../../../src/transport/index.js';

const KEY = 'UAXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX';

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
const mayPublish = (role: Role, subject: string): boolean => (permissionsFor(role, KEY)?.publish ?? ['>']).some((p) => matches(p, subject));
const maySubscribe = (role: Role, subject: string): boolean => (permissionsFor(role, KEY)?.subscribe ?? ['>']).some((p) => matches(p, subject));

const agentA: Role = { role: 'agent', cluster: 'a.b' };
const proxy: Role = { role: 'proxy', operator: 'ns/op', shard: 'a/s1' };
const kvPut = (bucket: string, key: string): string => `$KV.${bucket}.${key}`;
const consumerOn = (bucket: string, key: string): string => `$JS.API.CONSUMER.CREATE.KV_${bucket}.c1.$KV.${bucket}.${key}`;
/** JetStream API subjects that name a delivery or take a reply: none is open to an agent or a proxy. */
const jetStreamApi = (bucket: string): string[] => [
  consumerOn(bucket, '>'),
  `$JS.API.CONSUMER.CREATE.KV_${bucket}`,
  `$JS.API.CONSUMER.DURABLE.CREATE.KV_${bucket}.d1`,
  `$JS.API.CONSUMER.MSG.NEXT.KV_${bucket}.d1`,
  `$JS.API.DIRECT.GET.KV_${bucket}`,
  `$JS.API.STREAM.INFO.KV_${bucket}`,
  `$JS.API.STREAM.MSG.GET.KV_${bucket}`,
  `$JS.FC.KV_${bucket}.x.1`,
  `$JS.ACK.KV_${bucket}.d1.1.1.1.1.0`,
];

describe('role permissions', () => {
  it('an agent speaks for its own cluster only, and uses no JetStream API', () => {
    expect(mayPublish(agentA, Subjects.heartbeat('a.b'))).toBe(true);
    expect(mayPublish(agentA, Subjects.report('a.b'))).toBe(true);
    expect(mayPublish(agentA, Subjects.registerAs('a.b'))).toBe(true);
    // A name with a dot is one encoded token: it cannot widen into another cluster's subject.
    expect(mayPublish(agentA, Subjects.heartbeat('a'))).toBe(false);
    expect(mayPublish(agentA, Subjects.report('b'))).toBe(false);
    expect(mayPublish(agentA, Subjects.ack('ns/op', 'a/s1'))).toBe(false);
    for (const bucket of Object.values(Buckets)) {
      expect(mayPublish(agentA, kvPut(bucket, 'x'))).toBe(false);
      for (const subject of jetStreamApi(bucket)) expect(mayPublish(agentA, subject), subject).toBe(false);
    }
    expect(mayPublish(agentA, '$JS.API.INFO')).toBe(false);
    expect(mayPublish(agentA, kvPut(Buckets.state, Keys.ack('ns/op', 'a/s1')))).toBe(false);
  });

  it('an agent asks a hub for its own feeds and reads no other identity\'s', () => {
    const watch = Subjects.watchCluster('a.b');
    expect(mayPublish(agentA, watch)).toBe(true);
    expect(mayPublish(agentA, Subjects.watchCluster('b'))).toBe(false);
    expect(mayPublish(agentA, Subjects.watchShard('ns/op', 'a/s1'))).toBe(false);
    expect(maySubscribe(agentA, Subjects.feed(watch, 'abcdefgh1'))).toBe(true);
    expect(maySubscribe(agentA, Subjects.feed(Subjects.watchCluster('b'), 'abcdefgh1'))).toBe(false);
    expect(maySubscribe(agentA, Subjects.feed(Subjects.watchShard('ns/op', 'a/s1'), 'abcdefgh1'))).toBe(false);
    // Nobody but the server (and the hub) publishes on a feed subject.
    expect(mayPublish(agentA, Subjects.feed(watch, 'abcdefgh1'))).toBe(false);
  });

  it("a proxy asks for its own table's feed and acknowledges for its own shard", () => {
    expect(mayPublish(proxy, Subjects.ack('ns/op', 'a/s1'))).toBe(true);
    expect(mayPublish(proxy, Subjects.ack('ns/op', 'a/s2'))).toBe(false);
    const watch = Subjects.watchShard('ns/op', 'a/s1');
    expect(mayPublish(proxy, watch)).toBe(true);
    expect(mayPublish(proxy, Subjects.watchShard('ns/op', 'a/s2'))).toBe(false);
    expect(mayPublish(proxy, Subjects.watchCluster('a'))).toBe(false);
    expect(maySubscribe(proxy, Subjects.feed(watch, 'abcdefgh1'))).toBe(true);
    expect(maySubscribe(proxy, Subjects.feed(Subjects.watchShard('ns/op', 'a/s2'), 'abcdefgh1'))).toBe(false);
    expect(mayPublish(proxy, Subjects.feed(watch, 'abcdefgh1'))).toBe(false);
    for (const bucket of Object.values(Buckets)) {
      expect(mayPublish(proxy, kvPut(bucket, Keys.route('ns/op', 'a/s1')))).toBe(false);
      for (const subject of jetStreamApi(bucket)) expect(mayPublish(proxy, subject), subject).toBe(false);
    }
  });

  it('every non-hub identity subscribes to its own inbox and feeds only; the bootstrap may only ask to register', () => {
    for (const role of [agentA, proxy, { role: 'bootstrap' } as Role]) {
      expect(maySubscribe(role, `_INBOX_${KEY}.abc`)).toBe(true);
      expect(maySubscribe(role, '$JS.API.>')).toBe(false);
      expect(maySubscribe(role, '_INBOX.abc')).toBe(false);
      expect(maySubscribe(role, Subjects.register)).toBe(false);
      expect(maySubscribe(role, '>')).toBe(false);
    }
    expect(permissionsFor({ role: 'bootstrap' }, KEY)?.publish).toEqual([Subjects.register]);
    expect(permissionsFor({ role: 'hub' }, KEY)).toBeUndefined();
  });
});
