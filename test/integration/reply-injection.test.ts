import { Kvm, type KV } from '@nats-io/kv';
import { connect, headers, type MsgHdrs, type NatsConnection } from '@nats-io/transport-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentHandle } from '../../src/agent/index.js';
import { readmitCluster, removeCluster } from '../../src/hub/cluster-removal.js';
import { startHub, type HubHandle } from '../../src/hub/index.js';
import { Buckets, DROP_LOG_INTERVAL_MS, Keys, MESSAGE_SCHEMA_VERSION, Messages, Subjects, encodeMessage, inboxPrefixFor, natsConnectionOptions, PROOF_HEADER, proveMessage, type ClusterRecord, type ClusterReport, type NatsClientConfig, type RegisterRequest } from '../../src/transport/index.js';
import { newUserKey, type Role } from '../../src/transport/auth/index.js';
import { natsClientConfig } from '../../src/dev/index.js';
import { TOKEN, bootstrapTokens, eventually, hubOptions, observe, privateNats, proxyNatsConfig, runAgent, runHub } from './control-fixture.js';
import { cluster, uniqueName } from './helpers/testbed.js';

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * NATS does not check a request's reply subject against the requester's permissions, and the hub, which may write
 * every bucket, answers under its own identity: a reply subject naming `$KV.<bucket>.<key>` would have the hub write
 * its answer there (a removal undone, a registry record overwritten, the leader lease taken from the hub every few
 * seconds). Judged by effect: what the KV buckets hold, and who leads.
 */
describe('the hub answers requests on inboxes only', () => {
  const a = uniqueName('rpa');
  const newcomer = uniqueName('rpn');
  let nats: Awaited<ReturnType<typeof privateNats>>;
  let hub: HubHandle;
  let agent: AgentHandle | undefined;
  let observer: NatsConnection;
  let kv: { clusters: KV; state: KV; hub: KV };
  const clients: NatsConnection[] = [];
  let template: ClusterReport;

  const as = async (role: Role): Promise<NatsConnection> => {
    const nc = await connect({ ...natsConnectionOptions(await natsClientConfig(nats.nats, role)), maxReconnectAttempts: 0 });
    clients.push(nc);
    return nc;
  };
  const registration = (name: string, extra: Partial<RegisterRequest> = {}): Uint8Array =>
    encodeMessage(Messages.registerRequest, { schema: MESSAGE_SCHEMA_VERSION, cluster: { name, labels: {}, server: cluster(0).server, caPem: cluster(0).caPem }, ...extra });
  /** Every value written to the three buckets the hub writes while `attack` runs (and a moment after). */
  const writtenDuring = async (attack: () => Promise<void>): Promise<string[]> => {
    const written: string[] = [];
    const watches = await Promise.all(Object.entries(kv).map(([bucket, store]) => store.watch({ key: '>', include: 'updates' }).then((w) => ({ bucket, w }))));
    const reading = watches.map(async ({ bucket, w }) => {
      for await (const e of w) written.push(`${bucket}/${e.key} ${e.operation} ${e.string()}`);
    });
    await attack();
    await pause(1_500);
    for (const { w } of watches) w.stop();
    await Promise.all(reading);
    return written;
  };
  /** A hub's answer (a RegisterReply or a RenewReply) where the hub keeps state. */
  const answers = (written: string[]): string[] => written.filter((w) => /"ok":|"extended":/u.test(w));
  /** A request answered, asked again while a hub that has just started reads its buckets (it answers nothing then). */
  const ask = (nc: NatsConnection, subject: string, data: Uint8Array, sent?: MsgHdrs): Promise<string> =>
    eventually(async () => new TextDecoder().decode((await nc.request(subject, data, { timeout: 2_000, ...(sent ? { headers: sent } : {}) })).data), 30_000);
  const targets = (): string[] => [
    `$KV.${Buckets.clusters}.${Keys.cluster(a)}`,
    `$KV.${Buckets.state}.${Keys.removal(a)}`,
    `$KV.${Buckets.state}.${Keys.report(a)}`,
    `$KV.${Buckets.hub}.${Keys.leader}`,
  ];

  /** The headers of a message signed with `seed` (message-proof.ts). */
  const signedBy = (seed: Uint8Array, subject: string, data: Uint8Array): MsgHdrs => {
    const h = headers();
    h.set(PROOF_HEADER, proveMessage(seed, subject, data, new Date()));
    return h;
  };
  /** A hub started afresh, accepting the tokens of `clusters`, once it leads. */
  const restartHub = async (identity: string, ...clusters: string[]): Promise<void> => {
    await hub.stop();
    hub = await runHub(nats.nats, identity, { tokens: bootstrapTokens(...clusters) });
    await eventually(() => expect(hub.isLeader()).toBe(true), 30_000);
  };
  /** A bootstrap holder, and the inbox prefix its key names. */
  const bootstrapHolder = async (): Promise<{ boot: NatsConnection; config: NatsClientConfig; inboxPrefix: string }> => {
    const config = await natsClientConfig(nats.nats, { role: 'bootstrap' });
    const boot = await connect({ ...natsConnectionOptions(config), maxReconnectAttempts: 0 });
    clients.push(boot);
    return { boot, config, inboxPrefix: inboxPrefixFor(config.credentials) };
  };
  /** The agent's token exchange for a key of its own; `connectAs` connects with the identity minted for it. */
  const exchange = async (holder: { boot: NatsConnection; config: NatsClientConfig }, name: string): Promise<{ key: ReturnType<typeof newUserKey>; connectAs(): Promise<NatsConnection> }> => {
    const key = newUserKey();
    // Signed with the key it asks to bind, as the agent signs it: the hub then counts only what that key signs.
    const request = registration(name, { token: TOKEN, publicKey: key.publicKey });
    const reply = JSON.parse(await ask(holder.boot, Subjects.register, request, signedBy(key.seed, Subjects.register, request))) as { ok: boolean; jwt?: string };
    expect(reply).toMatchObject({ ok: true, jwt: expect.any(String) });
    return {
      key,
      connectAs: async () => {
        const nc = await connect({ ...natsConnectionOptions({ ...holder.config, credentials: { kind: 'jwt', jwt: reply.jwt!, seed: key.seed } }), maxReconnectAttempts: 0 });
        clients.push(nc);
        return nc;
      },
    };
  };

  beforeAll(async () => {
    nats = await privateNats();
    hub = await runHub(nats.nats, 'hub-reply', { tokens: bootstrapTokens(a, newcomer) });
    agent = await runAgent({ registryName: a, bed: cluster(0), nats: nats.nats, webhook: undefined });
    observer = await observe(nats.nats);
    const kvm = new Kvm(observer);
    kv = { clusters: await kvm.open(Buckets.clusters), state: await kvm.open(Buckets.state), hub: await kvm.open(Buckets.hub) };
    await eventually(() => expect(hub.status().clusters.find((c) => c.name === a)?.health).toBe('Ready'), 30_000);
    // A real agent's report, to forge others from (a is removed later, and its report with it).
    template = JSON.parse((await eventually(async () => (await kv.state.get(Keys.report(a)))!.string(), 30_000))) as ClusterReport;
  }, 120_000);

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
    await observer?.close();
    await agent?.stop();
    await hub?.stop();
    await nats?.cleanup();
  });

  it('writes nothing for a bootstrap holder whose requests name a KV key as their reply, a valid token included', async () => {
    const boot = await as({ role: 'bootstrap' });
    const removal = await kv.state.get(Keys.removal(a));
    const written = await writtenDuring(async () => {
      for (let i = 0; i < 5; i++) {
        for (const reply of targets()) {
          boot.publish(Subjects.register, registration('x', { token: 'wrong' }), { reply });
          // A request the hub would accept: dropped before it is judged, so the newcomer is not registered either.
          boot.publish(Subjects.register, registration(newcomer, { token: TOKEN, publicKey: newUserKey().publicKey }), { reply });
        }
        await pause(200);
      }
      await boot.flush();
    });
    expect(written.length).toBeGreaterThan(0);
    expect(answers(written)).toEqual([]);
    expect(removal).toBeNull();
    expect(await kv.state.get(Keys.removal(a))).toBeNull();
    expect(hub.isLeader()).toBe(true);
    expect(hub.status().clusters.map((c) => c.name)).toEqual([a]);
    // The positive control: the same request on an inbox is answered, and registers the newcomer.
    expect(await ask(boot, Subjects.register, registration(newcomer, { token: TOKEN }))).toContain('"ok":true');
    await eventually(() => expect(hub.status().clusters.map((c) => c.name)).toContain(newcomer));
  });

  it("keeps a removal that the removed cluster's own identity aims the hub's answer at, across a hub restart", async () => {
    await eventually(() => expect(hub.isLeader()).toBe(true), 30_000);
    const own = await as({ role: 'agent', cluster: a });
    expect(await removeCluster({ clusters: kv.clusters, state: kv.state }, a, new Date())).toBe(true);
    const removal = await kv.state.get(Keys.removal(a));
    const written = await writtenDuring(async () => {
      for (const reply of targets()) own.publish(Subjects.registerAs(a), registration(a), { reply });
      await own.flush();
    });
    expect(answers(written)).toEqual([]);
    expect((await kv.state.get(Keys.removal(a)))?.revision).toBe(removal?.revision);
    await hub.stop();
    hub = await runHub(nats.nats, 'hub-reply-2', { tokens: bootstrapTokens(a, newcomer) });
    await eventually(() => expect(hub.isLeader()).toBe(true), 30_000);
    expect(await ask(own, Subjects.registerAs(a), registration(a, { publicKey: newUserKey().publicKey }))).toContain('it was removed from the fleet');
    expect(hub.status().removedClusters).toContain(a);
  }, 60_000);

  it("mints under a cluster's own identity only for that identity's key", async () => {
    const other = uniqueName('rpo');
    await restartHub('hub-reply-3', other);
    const boot = await as({ role: 'bootstrap' });
    expect(await ask(boot, Subjects.register, registration(other, { token: TOKEN }))).toContain('"ok":true');
    const own = await as({ role: 'agent', cluster: other });
    const reply = JSON.parse(await ask(own, Subjects.registerAs(other), registration(other, { publicKey: newUserKey().publicKey }))) as { ok: boolean; jwt?: string; error?: string };
    expect(reply).toMatchObject({ ok: false, error: expect.stringMatching(/minted only for that identity's key/u) });
    expect(reply.jwt).toBeUndefined();
  }, 60_000);

  it("mints under a copy of a cluster's identity nothing for the shared bootstrap key: only for the key its token was exchanged for", async () => {
    const third = uniqueName('rpt');
    await restartHub('hub-reply-4', third);
    const holder = await bootstrapHolder();
    const { boot } = holder;
    const bootstrapKey = /^_INBOX_(U[A-Z2-7]{55})$/u.exec(holder.inboxPrefix)?.[1];
    expect(bootstrapKey).toBeDefined();
    // The agent exchanges its token for an identity of its own key.
    const agent = await exchange(holder, third);
    // A copy of the cluster's identity asks for one minted for the bootstrap key, answered on that key's inbox,
    // which every bootstrap holder reads: what arrives there is a refusal, no identity.
    const copy = await as({ role: 'agent', cluster: third });
    const inbox = `${holder.inboxPrefix}.stolen`;
    const arrived = boot.subscribe(inbox, { max: 1 });
    await boot.flush();
    copy.publish(Subjects.registerAs(third), registration(third, { publicKey: bootstrapKey! }), { reply: inbox });
    await copy.flush();
    let stolen: { ok: boolean; jwt?: string; error?: string } | undefined;
    for await (const m of arrived) stolen = JSON.parse(new TextDecoder().decode(m.data)) as typeof stolen;
    expect(stolen).toMatchObject({ ok: false, error: expect.stringMatching(/renewed for only the key its bootstrap token was last exchanged for/u) });
    expect(stolen?.jwt).toBeUndefined();
    // The positive control: the agent's own identity is renewed for its key.
    const own = await agent.connectAs();
    expect(JSON.parse(await ask(own, Subjects.registerAs(third), registration(third, { publicKey: agent.key.publicKey })))).toMatchObject({ ok: true, jwt: expect.any(String) });
  }, 60_000);

  it("a copy of a cluster's identity changes no record once the token has bound another key, and does not register the cluster again after a readmission", async () => {
    const fifth = uniqueName('rpf');
    await restartHub('hub-reply-6', fifth);
    const stolen = await exchange(await bootstrapHolder(), fifth);
    const copy = await stolen.connectAs();
    const renewal = registration(fifth, { publicKey: stolen.key.publicKey });
    // Removed and readmitted while the copy is still valid: its renewals stay refused.
    expect(await removeCluster({ clusters: kv.clusters, state: kv.state }, fifth, new Date())).toBe(true);
    expect(await readmitCluster({ clusters: kv.clusters, state: kv.state }, fifth)).toBe(true);
    const wrongCluster = { name: fifth, labels: {}, server: cluster(0).server, caPem: `${cluster(0).caPem}\n` };
    const wrongCa = encodeMessage(Messages.registerRequest, { schema: MESSAGE_SCHEMA_VERSION, cluster: wrongCluster });
    for (const request of [renewal, wrongCa]) {
      await eventually(async () => expect(JSON.parse(await ask(copy, Subjects.registerAs(fifth), request))).toMatchObject({ ok: false, error: expect.stringMatching(/no key is bound since it was removed/u) }));
    }
    expect((await kv.clusters.get(Keys.cluster(fifth)))?.operation).not.toBe('PUT');
    // Its token exchanged again (a new key bound), the copy, still valid, changes no record: what it sends under the
    // cluster's subject is not signed with the bound key, unsigned or signed with its own.
    const bound = await exchange(await bootstrapHolder(), fifth);
    const refusedUnsigned = /changes only when the request is signed with the key its bootstrap token was last exchanged for/u;
    const copyRepoints = async (): Promise<void> => {
      for (const signed of [undefined, signedBy(stolen.key.seed, Subjects.registerAs(fifth), wrongCa)]) {
        expect(JSON.parse(await ask(copy, Subjects.registerAs(fifth), wrongCa, signed))).toMatchObject({ ok: false, error: expect.stringMatching(refusedUnsigned) });
      }
    };
    await copyRepoints();
    // Reports signed with the bound key are taken in order; one replayed (its proof holds for minutes) rolls nothing back.
    const report = (marker: string): Uint8Array =>
      encodeMessage(Messages.clusterReport, { ...template, cluster: fifth, sentAt: new Date().toISOString(), namespaces: [{ name: marker, labels: {} }] });
    const storedReport = async (): Promise<string | undefined> => (await kv.state.get(Keys.report(fifth)))?.string();
    const first = report('first-report');
    const firstSigned = signedBy(bound.key.seed, Subjects.report(fifth), first);
    const own = await bound.connectAs();
    own.publish(Subjects.report(fifth), first, { headers: firstSigned });
    await eventually(async () => expect(await storedReport()).toContain('first-report'));
    await pause(5);
    const second = report('second-report');
    own.publish(Subjects.report(fifth), second, { headers: signedBy(bound.key.seed, Subjects.report(fifth), second) });
    await eventually(async () => expect(await storedReport()).toContain('second-report'));
    const replayed = await writtenDuring(async () => {
      copy.publish(Subjects.report(fifth), first, { headers: firstSigned });
      await copy.flush();
    });
    expect(replayed.filter((w) => w.includes('first-report'))).toEqual([]);
    // A record that names another CA (as after the API server's CA rotated): the agent starts with its token (a new key
    // again), which re-points nothing, then re-points the cluster as itself, signed with the key it just bound.
    const staleAt = '2020-01-01T00:00:00.000Z';
    const stale: ClusterRecord = { schema: MESSAGE_SCHEMA_VERSION, cluster: wrongCluster, registeredAt: staleAt, updatedAt: staleAt };
    await kv.clusters.put(Keys.cluster(fifth), encodeMessage(Messages.clusterRecord, stale));
    await eventually(() => expect(hub.status().clusters.find((c) => c.name === fifth)?.registeredAt).toBe(staleAt));
    const fifthAgent = await runAgent({ registryName: fifth, bed: cluster(0), nats: nats.nats, webhook: undefined });
    try {
      const caPem = async (): Promise<string> => (JSON.parse((await kv.clusters.get(Keys.cluster(fifth)))!.string()) as ClusterRecord).cluster.caPem;
      await eventually(async () => expect(await caPem()).toBe(cluster(0).caPem));
      await copyRepoints();
      expect(JSON.parse(await ask(copy, Subjects.registerAs(fifth), renewal))).toMatchObject({ ok: false, error: expect.stringMatching(/only the key its bootstrap token was last exchanged for/u) });
      expect(await caPem()).toBe(cluster(0).caPem);
      // Nor does the copy report for the cluster, unsigned or signed with its own key: the agent's report stays.
      const stored = async (): Promise<string | undefined> => (await kv.state.get(Keys.report(fifth)))?.string();
      await eventually(async () => expect(await stored()).toBeDefined());
      const real = JSON.parse((await stored())!) as ClusterReport;
      const forged = encodeMessage(Messages.clusterReport, { ...real, sentAt: new Date().toISOString(), namespaces: [...real.namespaces, { name: 'forged-by-copy', labels: {} }] });
      const written = await writtenDuring(async () => {
        copy.publish(Subjects.report(fifth), forged);
        copy.publish(Subjects.report(fifth), forged, { headers: signedBy(stolen.key.seed, Subjects.report(fifth), forged) });
        await copy.flush();
      });
      expect(written.filter((w) => w.includes('forged-by-copy'))).toEqual([]);
    } finally {
      await fifthAgent.stop();
    }
  }, 90_000);

  it("a copy of a cluster's identity keeps it Ready no longer than its agent once the token bound another key; a replayed heartbeat counts not", async () => {
    const sixth = uniqueName('rph');
    await restartHub('hub-reply-8', sixth);
    const stolen = await exchange(await bootstrapHolder(), sixth);
    const copy = await stolen.connectAs();
    const bound = await exchange(await bootstrapHolder(), sixth);
    const own = await bound.connectAs();
    const subject = Subjects.heartbeat(sixth);
    const health = (): string | undefined => hub.status().clusters.find((c) => c.name === sixth)?.health;
    const beat = (): Uint8Array => encodeMessage(Messages.heartbeat, { schema: MESSAGE_SCHEMA_VERSION, cluster: sixth, sentAt: new Date().toISOString(), apiServerReachable: true });
    // The agent's heartbeats, signed with the key its token bound, keep the cluster Ready.
    let last = { data: beat(), signed: headers() };
    const agentBeats = setInterval(() => {
      const data = beat();
      last = { data, signed: signedBy(bound.key.seed, subject, data) };
      own.publish(subject, data, { headers: last.signed });
    }, 300);
    try {
      await eventually(() => expect(health()).toBe('Ready'));
    } finally {
      clearInterval(agentBeats);
    }
    // The agent is gone. The copy heartbeats unsigned, signed with its own key, and replays the agent's last one.
    const copyBeats = setInterval(() => {
      const data = beat();
      copy.publish(subject, data);
      copy.publish(subject, data, { headers: signedBy(stolen.key.seed, subject, data) });
      copy.publish(subject, last.data, { headers: last.signed });
    }, 300);
    try {
      // Unknown after --unknown-after (2 s here), Offline after --offline-after (5 s): as if no one sent a heartbeat.
      await eventually(() => expect(health()).toBe('Offline'), 15_000);
    } finally {
      clearInterval(copyBeats);
    }
  }, 60_000);

  it('logs a flood of refused and dropped requests as one line a cause each interval, with the count held back', async () => {
    await hub.stop();
    const lines: { msg: string; suppressed?: number; cluster?: string }[] = [];
    const recording = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line) as { msg: string; suppressed?: number; cluster?: string }) });
    hub = await startHub(hubOptions(nats.nats, 'hub-reply-5', { tokens: bootstrapTokens(newcomer) }), { logger: recording });
    await eventually(() => expect(hub.isLeader()).toBe(true), 30_000);
    const boot = await as({ role: 'bootstrap' });
    expect(await ask(boot, Subjects.register, registration('x', { token: 'wrong' }))).toContain('"ok":false');
    const flood = async (): Promise<void> => {
      for (let i = 0; i < 1_000; i++) {
        boot.publish(Subjects.register, registration('x', { token: 'wrong' }), { reply: '_INBOX.flood' });
        boot.publish(Subjects.register, registration('x', { token: 'wrong' }), { reply: `$KV.${Buckets.hub}.${Keys.leader}` });
        boot.publish(Subjects.register, new TextEncoder().encode('{"schema": 99'), { reply: '_INBOX.flood' });
      }
      await boot.flush();
    };
    const of = (msg: string): { msg: string; suppressed?: number; cluster?: string }[] => lines.filter((l) => l.msg.startsWith(msg));
    const causes = ['registration refused', "dropped a request whose reply subject is not a requester's inbox", 'dropped a malformed message'];
    await flood();
    // A refusal that follows an accepted token has a line of its own: a flood of wrong tokens hides it not.
    const plainHttp = { schema: MESSAGE_SCHEMA_VERSION, token: TOKEN, cluster: { name: newcomer, labels: {}, server: 'http://127.0.0.1:1', caPem: cluster(0).caPem } } as const;
    boot.publish(Subjects.register, encodeMessage(Messages.registerRequest, plainHttp), { reply: '_INBOX.flood' });
    await pause(1_000);
    for (const cause of causes) expect(of(cause).filter((l) => l.cluster !== newcomer).length, cause).toBeLessThanOrEqual(2);
    expect(of('registration refused').filter((l) => l.cluster === newcomer)).toHaveLength(1);
    // Nothing is lost: the next line of each cause, an interval later, counts what was held back.
    await pause(DROP_LOG_INTERVAL_MS);
    await flood();
    await eventually(() => {
      for (const cause of causes) expect(of(cause).at(-1)?.suppressed, cause).toBeGreaterThanOrEqual(999);
    });
    // The hub still answers.
    expect(await ask(boot, Subjects.register, registration(newcomer, { token: TOKEN }))).toContain('"ok":true');
  }, 90_000);

  it("takes no lease from the hub for a proxy whose renewals name the leader's key as their reply", async () => {
    const proxy = await connect({ ...natsConnectionOptions(await proxyNatsConfig(nats.nats, 'ns/op', 'op-0')), maxReconnectAttempts: 0 });
    clients.push(proxy);
    const request = encodeMessage(Messages.renewRequest, { schema: MESSAGE_SCHEMA_VERSION, operator: 'ns/op', shard: 'op-0', acknowledged: 0, nonce: 'abcdefgh' });
    const written = await writtenDuring(async () => {
      for (let i = 0; i < 10; i++) for (const reply of targets()) proxy.publish(Subjects.renew('ns/op', 'op-0'), request, { reply });
      await proxy.flush();
    });
    expect(answers(written)).toEqual([]);
    expect(hub.isLeader()).toBe(true);
    // The positive control: on its inbox, the renewal is answered.
    expect(await ask(proxy, Subjects.renew('ns/op', 'op-0'), request)).toContain('"kind":"RenewReply"');
  });
});
