import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { pino } from 'pino';
import { Kvm } from '@nats-io/kv';
import { connect, jwtAuthenticator, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAgent, type AgentHandle } from '../../src/agent/index.js';
import { removeCluster } from '../../src/hub/cluster-removal.js';
import type { HubHandle } from '../../src/hub/index.js';
import { Buckets, natsConnectionOptions } from '../../src/transport/index.js';
import { mintUserJwt, newUserKey } from '../../src/transport/auth/index.js';
import { natsClientConfig } from '../../src/dev/index.js';
import { agentOptions, bootstrapTokens, eventually, observe, privateNats, runHub, security } from './control-fixture.js';
import { cluster, kubeConfigFor, uniqueName } from './helpers/testbed.js';

const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
setFlagsFromString('--expose-gc');
/** A full garbage collection, as a loaded CI machine's worker makes often: it once stalled the agent's renewals. */
const gc = runInNewContext('gc') as () => void;

describe("an agent's NATS identity expires and is renewed (hub --agent-identity-ttl)", () => {
  const name = uniqueName('ttl');
  const TTL_MS = 4_000;
  let nats: Awaited<ReturnType<typeof privateNats>>;
  let hub: HubHandle;
  let agent: AgentHandle | undefined;
  let nc: NatsConnection;
  /** The agent's log lines, as messages. */
  const logged: string[] = [];

  beforeAll(async () => {
    nats = await privateNats();
    hub = await runHub(nats.nats, 'hub-ttl', { tokens: bootstrapTokens(name), agentIdentityTtlMs: TTL_MS });
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split('\n')) if (line) logged.push((JSON.parse(line) as { msg: string }).msg);
        done();
      },
    });
    agent = await startAgent(agentOptions({ registryName: name, bed: cluster(0), nats: nats.nats, webhook: undefined }), { kc: kubeConfigFor(cluster(0)), logger: pino({ level: 'info' }, sink) });
    nc = await observe(nats.nats);
  });

  afterAll(async () => {
    await nc?.close();
    await agent?.stop();
    await hub?.stop();
    await nats?.cleanup();
  });

  const connected = async (): Promise<string | undefined> => {
    const text = await (await fetch(`${agent?.url}/metrics`)).text();
    return /^ctrlmesh_agent_nats_connected(?:\{[^}]*\})? (\d+)/mu.exec(text)?.[1];
  };

  it('stays Ready across expiries: the NATS server closes the expired connection and the agent comes back with the renewed JWT', async () => {
    const health: string[] = [];
    const poll = setInterval(() => {
      const h = hub.status().clusters.find((c) => c.name === name)?.health;
      if (h !== undefined && health.at(-1) !== h) health.push(h);
    }, 50);
    try {
      await eventually(() => expect(health.at(-1)).toBe('Ready'));
      await pause(3 * TTL_MS);
      // By effect: the server did close it (the identity expired), the agent reconnected, and its heartbeats went on.
      expect(logged.filter((m) => m === "renewed the agent's NATS identity").length).toBeGreaterThanOrEqual(2);
      expect(logged).toContain('reconnected to NATS');
      expect(health).toEqual(['Ready']);
      expect(Date.now() - Date.parse(hub.status().clusters.find((c) => c.name === name)?.lastHeartbeat ?? '')).toBeLessThan(2_000);
    } finally {
      clearInterval(poll);
    }
  });

  it('outlives a hub outage longer than its identity: renewed with its bootstrap token, it reconnects', async () => {
    await hub.stop();
    const down = logged.length;
    for (let waited = 0; waited <= TTL_MS; waited += 500) {
      gc();
      await pause(500);
    }
    await pause(500);
    // Its identity expired meanwhile: the server shut it out, and no hub could renew it.
    expect(logged.slice(down)).toContain('disconnected from NATS; reconnecting');
    expect(await connected()).toBe('0');
    hub = await runHub(nats.nats, 'hub-ttl-2', { tokens: bootstrapTokens(name), agentIdentityTtlMs: TTL_MS });
    // A renewal attempt lasts up to 10 s and the next follows 5 s later; a loaded machine adds to both.
    await eventually(() => expect(hub.status().clusters.find((c) => c.name === name)?.health).toBe('Ready'), 60_000).catch((err: unknown) => {
      // What the agent did meanwhile, for whoever reads a failure.
      process.stderr.write(`agent log since the outage: ${JSON.stringify(logged.slice(down))}\n`);
      throw err;
    });
    expect(await connected()).toBe('1');
  });

  it('outlives a NATS outage longer than its identity: renewed with its token once the server is back, it reconnects', async () => {
    await eventually(async () => expect(await connected()).toBe('1'));
    const down = logged.length;
    await nats.nats.stop();
    for (let waited = 0; waited <= TTL_MS; waited += 500) {
      gc();
      await pause(500);
    }
    await pause(500);
    await nats.nats.start();
    await eventually(async () => {
      expect(await connected()).toBe('1');
      expect(Date.now() - Date.parse(hub.status().clusters.find((c) => c.name === name)?.lastHeartbeat ?? '')).toBeLessThan(2_000);
    }, 60_000).catch((err: unknown) => {
      process.stderr.write(`agent log since the outage: ${JSON.stringify(logged.slice(down))}\n`);
      throw err;
    });
    // Connected after an outage longer than its identity: the server accepted one minted since (it refuses expired ones).
    expect(logged.slice(down)).toContain("renewed the agent's NATS identity");
  });

  it('a removed cluster cannot renew: its agent is refused and disconnects', async () => {
    const kvm = new Kvm(nc);
    expect(await removeCluster({ clusters: await kvm.open(Buckets.clusters), state: await kvm.open(Buckets.state) }, name, new Date())).toBe(true);
    // The next renewal is due within half a lifetime; one that meets a closed connection is tried again in 10 s.
    await eventually(() => expect(logged).toContain("the hub refused to renew the agent's NATS identity: the agent disconnects from NATS"), TTL_MS + 30_000);
    await eventually(async () => expect(await connected()).toBe('0'), 5_000);
  });

  it('the NATS server refuses an agent identity once it has expired, whoever holds it', async () => {
    const { auth } = security(nats.nats);
    const key = newUserKey();
    const expiresAt = Math.floor(Date.now() / 1000) + 4;
    const jwt = await mintUserJwt({
      issuerSeed: readFileSync(auth.issuerSeed, 'utf8').trim(),
      account: auth.accountPublicKey,
      identity: { role: 'agent', cluster: name },
      publicKey: key.publicKey,
      expiresAt,
    });
    const options = { ...natsConnectionOptions(await natsClientConfig(nats.nats, { role: 'agent', cluster: name })), authenticator: jwtAuthenticator(jwt, key.seed), maxReconnectAttempts: 0 };
    const held = await connect(options);
    // Closed by the server at the expiry, and refused after it.
    await eventually(() => expect(held.isClosed()).toBe(true), 10_000);
    // The server takes a JWT as valid through its expiry's whole second: ask again once it is past.
    await pause(Math.max(0, expiresAt * 1000 + 1_100 - Date.now()));
    await expect(connect(options)).rejects.toThrow(/expired|authorization/iu);
  });
});
