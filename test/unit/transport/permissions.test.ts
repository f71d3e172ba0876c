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

describe('role permissions', () => {
  it('an agent speaks for its own cluster only, and writes no KV', () => {
    expect(mayPublish(agentA, Subjects.heartbeat('a.b'))).toBe(true);
    expect(mayPublish(agentA, Subjects.report('a.b'))).toBe(true);
    expect(mayPublish(agentA, Subjects.registerAs('a.b'))).toBe(true);
    // A name with a dot is one encoded token: it cannot widen into another cluster's subject.
    expect(mayPublish(agentA, Subjects.heartbeat('a'))).toBe(false);
    expect(mayPublish(agentA, Subjects.report('b'))).toBe(false);
    expect(mayPublish(agentA, Subjects.ack('ns/op', 'a/s1'))).toBe(false);
    for (const bucket of Object.values(Buckets)) expect(mayPublish(agentA, kvPut(bucket, 'x'))).toBe(false);
    expect(mayPublish(agentA, consumerOn(Buckets.routes, '>'))).toBe(true);
    expect(mayPublish(agentA, consumerOn(Buckets.clusters, '>'))).toBe(false);
  });

  it("an agent watches the hub's stored acknowledgements, and nothing else of its state", () => {
    expect(mayPublish(agentA, consumerOn(Buckets.state, Keys.ackAll))).toBe(true);
    expect(mayPublish(agentA, consumerOn(Buckets.state, Keys.ack('ns/op', 'a/s1')))).toBe(true);
    for (const key of ['>', 'ack.>', Keys.reportAll, Keys.report('b'), Keys.handoverAll, 'quarantine.>']) expect(mayPublish(agentA, consumerOn(Buckets.state, key)), key).toBe(false);
    expect(mayPublish(agentA, `$JS.API.STREAM.MSG.GET.KV_${Buckets.state}`)).toBe(false);
    expect(mayPublish(agentA, `$JS.API.DIRECT.GET.KV_${Buckets.state}`)).toBe(false);
    expect(mayPublish(agentA, kvPut(Buckets.state, Keys.ack('ns/op', 'a/s1')))).toBe(false);
  });

  it("a proxy watches its own table and acknowledges for its own shard", () => {
    expect(mayPublish(proxy, Subjects.ack('ns/op', 'a/s1'))).toBe(true);
    expect(mayPublish(proxy, Subjects.ack('ns/op', 'a/s2'))).toBe(false);
    expect(mayPublish(proxy, consumerOn(Buckets.routes, Keys.route('ns/op', 'a/s1')))).toBe(true);
    expect(mayPublish(proxy, consumerOn(Buckets.routes, Keys.route('ns/op', 'a/s2')))).toBe(false);
    expect(mayPublish(proxy, consumerOn(Buckets.routes, '>'))).toBe(false);
    expect(mayPublish(proxy, `$JS.API.CONSUMER.CREATE.KV_${Buckets.routes}`)).toBe(false);
    expect(mayPublish(proxy, `$JS.API.STREAM.MSG.GET.KV_${Buckets.routes}`)).toBe(false);
    expect(mayPublish(proxy, kvPut(Buckets.routes, Keys.route('ns/op', 'a/s1')))).toBe(false);
  });

  it('every non-hub identity subscribes to its own inbox only; the bootstrap may only ask to register', () => {
    for (const role of [agentA, proxy, { role: 'bootstrap' } as Role]) {
      expect(maySubscribe(role, `_INBOX_${KEY}.abc`)).toBe(true);
      expect(maySubscribe(role, '_INBOX.abc')).toBe(false);
      expect(maySubscribe(role, Subjects.register)).toBe(false);
      expect(maySubscribe(role, '>')).toBe(false);
    }
    expect(permissionsFor({ role: 'bootstrap' }, KEY)?.publish).toEqual([Subjects.register]);
    expect(permissionsFor({ role: 'hub' }, KEY)).toBeUndefined();
  });
});
