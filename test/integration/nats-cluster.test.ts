import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsCluster, type NatsClusterHandle, type NatsServerHandle } from '../../src/dev/index.js';
import { Buckets, createBuckets, openBucket } from '../../src/transport/index.js';
import { eventually, observe, privateNats } from './control-fixture.js';

const LEASE_TTL_MS = 3_000;

/** The server holding the stream's leadership, by the stream's own account of it. */
async function streamLeader(cluster: NatsClusterHandle, kv: KV): Promise<NatsServerHandle> {
  const name = (await kv.status()).streamInfo.cluster?.leader;
  const leader = cluster.servers.find((s) => s.name === name);
  if (!leader) throw new Error(`no stream leader yet (${String(name)})`);
  return leader;
}

/** A write that must succeed within the time JetStream needs to elect a new stream leader. */
async function writeSoon(kv: KV, key: string, value: string): Promise<void> {
  await eventually(() => kv.put(key, value), 20_000, 200);
}

async function read(kv: KV, key: string): Promise<string | undefined> {
  return (await kv.get(key))?.string();
}

// A private cluster: stopping, killing and freezing its servers must not disturb the shared bed.
describe('a 3-server NATS cluster (TLS, JWT auth, JetStream on all)', () => {
  let dir: string;
  let cluster: NatsClusterHandle;
  let nc: NatsConnection;
  let kv: KV;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-nats-cluster-'));
    cluster = await startNatsCluster({ dir, servers: 3 });
    // The hub's identity, given every server's URL: it reconnects to another when its server goes.
    nc = await observe(cluster, { maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  });
  afterAll(async () => {
    await nc?.close();
    await cluster?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('starts with a meta leader elected, every server its own ports and TLS, all URLs for clients', async () => {
    expect(cluster.servers.map((s) => s.name)).toEqual(['ctrlmesh-testbed-1', 'ctrlmesh-testbed-2', 'ctrlmesh-testbed-3']);
    expect(cluster.urls).toEqual(cluster.servers.map((s) => s.url));
    expect(new Set(cluster.urls).size).toBe(3);
    expect(cluster.urls.every((u) => u.startsWith('tls://127.0.0.1:'))).toBe(true);
    expect(cluster.security?.auth.hubCreds).toBeTruthy();
    expect(cluster.servers.map((s) => s.name)).toContain((await cluster.metaLeader())?.name);
    // The server tells a client about the whole cluster.
    expect(nc.info?.cluster).toBe('ctrlmesh-testbed');
    expect(nc.info?.connect_urls).toHaveLength(3);
  });

  it("the hub's buckets get 3 replicas by themselves, and one server stopped and restarted loses nothing", async () => {
    const buckets = await createBuckets({ js: jetstream(nc), replicas: 'auto', leaseTtlMs: LEASE_TTL_MS });
    expect(buckets.replicas).toBe(3);
    kv = buckets.state;
    expect((await kv.status()).replicas).toBe(3);
    await kv.put('before', '1');

    // The stream leader itself goes: the two left elect another, and writes and reads go on.
    const stopped = await streamLeader(cluster, kv);
    await stopped.stop();
    expect(stopped.pid()).toBeUndefined();
    await writeSoon(kv, 'while-down', '2');
    expect(await read(kv, 'before')).toBe('1');
    expect(await read(kv, 'while-down')).toBe('2');
    expect((await streamLeader(cluster, kv)).name).not.toBe(stopped.name);

    // Back with its data, it catches up on what it missed ...
    await stopped.start();
    await cluster.ready();
    await eventually(async () => {
      const replicas = (await kv.status()).streamInfo.cluster?.replicas ?? [];
      expect(replicas).toHaveLength(2);
      expect(replicas.every((r) => r.current)).toBe(true);
    });
    // ... so that with another server gone, the pair it is part of still holds everything.
    const other = cluster.servers.find((s) => s !== stopped && s.name !== nc.info?.server_name) as NatsServerHandle;
    await other.stop();
    try {
      await writeSoon(kv, 'after', '3');
      expect(await read(kv, 'while-down')).toBe('2');
      expect(await read(kv, 'after')).toBe('3');
    } finally {
      await other.start();
      await cluster.ready();
    }
  });

  it('the meta leader killed (SIGKILL): another is elected, and it rejoins when started', async () => {
    const leader = await cluster.metaLeader();
    expect(leader).toBeDefined();
    await leader?.kill();
    expect(leader?.pid()).toBeUndefined();
    const next = await eventually(async () => {
      const elected = await cluster.metaLeader();
      expect(elected).toBeDefined();
      expect(elected?.name).not.toBe(leader?.name);
      return elected;
    });
    expect(next?.pid()).toBeDefined();
    await writeSoon(kv, 'after-meta-leader', '4');

    await leader?.start();
    await cluster.ready();
    expect(await read(kv, 'after-meta-leader')).toBe('4');
  });

  it('one server frozen (SIGSTOP) answers nothing while the others go on; thawed (SIGCONT), it is healthy again', async () => {
    const frozen = cluster.servers.find((s) => s.name !== nc.info?.server_name) as NatsServerHandle;
    // Opened before the freeze (opening asks the stream's leader, which may be the server frozen).
    const quick = await openBucket(jetstream(nc, { timeout: 1_000 }), Buckets.state);
    await frozen.freeze();
    try {
      await expect(fetch(`${frozen.monitorUrl}/healthz`, { signal: AbortSignal.timeout(500) })).rejects.toThrow();
      expect(frozen.pid()).toBeDefined();
      await writeSoon(kv, 'while-frozen', '5');
      // A KV get is a direct get any replica may answer: one sent to the frozen server times out, the next goes on.
      // Each try waits 1 s, not JetStream's default 5 s: four tries in a row that all met the frozen server failed this.
      await eventually(async () => expect(await read(quick, 'while-frozen')).toBe('5'), 20_000, 200);
    } finally {
      frozen.thaw();
    }
    await cluster.ready();
    expect((await fetch(`${frozen.monitorUrl}/healthz`)).status).toBe(200);
  });
});

describe('the same bucket creation on one server', () => {
  it('settles on 1 replica by itself', async () => {
    const { nats, cleanup } = await privateNats();
    try {
      const nc = await observe(nats);
      try {
        const buckets = await createBuckets({ js: jetstream(nc), replicas: 'auto', leaseTtlMs: LEASE_TTL_MS });
        expect(buckets.replicas).toBe(1);
        expect((await buckets.routes.status()).replicas).toBe(1);
      } finally {
        await nc.close();
      }
    } finally {
      await cleanup();
    }
  });
});
