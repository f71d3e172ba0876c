import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNats, type NatsHandle } from '../../src/dev/index.js';
import { NatsRouteSource } from '../../src/proxy/index.js';
import {
  connectNats,
  createBuckets,
  publishRouteTable,
  routeSigner,
  serveRenewals,
  serveWatches,
  subscribeAcks,
  type Ack,
  type NatsClientConfig,
  type NatsLink,
} from '../../src/transport/index.js';
import { hubNatsConfig, proxyNatsConfig, routeSignerKey, security } from './control-fixture.js';
import type { RouteTable } from '../../src/transport/index.js';
import { HASH_LABEL, bucket, clusterRoute, routeTable, settles, silent, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { cluster, kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

const OPERATOR = 'operator-demo/demo';

describe('the proxy following its route table in NATS (a private NATS server, stopped and started)', () => {
  const a = cluster(0);
  const admin = kubeConfigFor(a).makeApiClient(CoreV1Api);
  const ns = uniqueName('nats');
  let dir: string;
  let nats: NatsHandle;
  let hub: NatsLink;
  const acks: Ack[] = [];
  const published = new Map<string, number>();
  /** Lease renewals the hub's side answered, per shard. */
  const renewals = new Map<string, number>();
  let publish: (table: RouteTable) => Promise<number>;
  // Each shard's proxy connects with its own identity, minted before the test starts it.
  const identities = new Map<string, NatsClientConfig>();
  const source = (shard: string) => () =>
    new NatsRouteSource({
      nats: identities.get(shard) as NatsClientConfig,
      trusted: [routeSignerKey(nats)],
      operator: OPERATOR,
      shard,
      from: `${shard}-pod`,
      logger: silent,
      reackMs: 500,
    });
  const readyz = async (harness: TestProxy) => {
    const res = await fetch(`${harness.proxy.opsUrl}/readyz`);
    return { status: res.status, text: await res.text() };
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-proxy-nats-'));
    nats = await startNats({ dir: join(dir, 'nats'), logger: silent });
    hub = await connectNats({ config: hubNatsConfig(nats), name: 'test-hub', logger: silent });
    for (const shard of ['shard-live', 'shard-stored', 'shard-renew']) identities.set(shard, await proxyNatsConfig(nats, OPERATOR, shard));
    const signer = routeSigner(readFileSync(security(nats).auth.routeSigningSeed, 'utf8'));
    const { routes } = await createBuckets({ js: hub.js, replicas: 1, leaseTtlMs: 10_000 });
    // After a restart of nats-server JetStream answers only once it has recovered its store: retry until then.
    publish = async (table) => {
      let revision = 0;
      await settles(async () => {
        revision = await publishRouteTable(routes, signer, table);
      }, 30_000);
      published.set(table.shard, table.version);
      return revision;
    };
    // The hub's sides of the proxies' feeds (their only way to read KV) and of their leases.
    serveWatches({ link: hub, logger: silent });
    serveRenewals({
      link: hub,
      signer,
      logger: silent,
      published: (_operator, shard) => {
        renewals.set(shard, (renewals.get(shard) ?? 0) + 1);
        return published.get(shard) ?? 0;
      },
    });
    subscribeAcks({ link: hub, logger: silent, onAck: (ack) => acks.push(ack) });
    await admin.createNamespace({ body: { metadata: { name: ns } } });
    await admin.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'cm', labels: { [HASH_LABEL]: String(bucket(ns)) } } } });
  }, 60_000);

  afterAll(async () => {
    await hub?.close();
    await nats?.stop();
    await admin.deleteNamespace({ name: ns }).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  it('applies and acknowledges live tables, and fences itself after its lease without NATS', async () => {
    const shard = 'shard-live';
    const table = routeTable({ shard, homeCluster: a.name, clusters: [clusterRoute(a, [bucket(ns)])], leaseSeconds: 2 });
    await publish(table);
    const harness = await startTestProxy({ table: undefined, credentialsPath: testbed().kubeconfigPath, dir: join(dir, shard), source: source(shard) });
    try {
      await settles(() => expect(acks.some((ack) => ack.shard === shard && ack.version === 1 && ack.from === `${shard}-pod`)).toBe(true));
      expect((await fetch(`${harness.proxy.apiUrl}/api/v1/namespaces/${ns}/configmaps/cm`)).status).toBe(200);

      // A revocation: the open watch is ended with 410, then version 2 is acknowledged.
      const watch = await fetch(`${harness.proxy.apiUrl}/api/v1/namespaces/${ns}/configmaps?watch=true`);
      await publish({ ...table, version: 2, clusters: [clusterRoute(a, [])] });
      const events = await watch.text();
      expect(events.trim().split('\n').at(-1)).toContain('"code":410');
      await settles(() => expect(acks.some((ack) => ack.shard === shard && ack.version === 2)).toBe(true));
      expect((await fetch(`${harness.proxy.apiUrl}/api/v1/namespaces/${ns}/configmaps/cm`)).status).toBe(404);
      await publish({ ...table, version: 3 });
      await settles(async () => expect((await fetch(`${harness.proxy.apiUrl}/api/v1/namespaces/${ns}/configmaps/cm`)).status).toBe(200));

      await nats.stop();
      await settles(async () => expect((await readyz(harness)).status).toBe(503), 20_000);
      expect((await readyz(harness)).text).toMatch(/fenced: no lease extension for \d+s from NATS .* \(lease 2s\)/);
      // Fenced, it cannot tell what it owns: 503 with Retry-After, never an empty shard (a client keeps its cache).
      for (const path of [`/api/v1/namespaces/${ns}/configmaps/cm`, '/api/v1/configmaps']) {
        const fenced = await fetch(`${harness.proxy.apiUrl}${path}`);
        expect(fenced.status).toBe(503);
        expect(fenced.headers.get('retry-after')).toBe('1');
      }

      await nats.start();
      await settles(async () => expect((await readyz(harness)).status).toBe(200), 30_000);
      expect((await fetch(`${harness.proxy.apiUrl}/api/v1/namespaces/${ns}/configmaps/cm`)).status).toBe(200);
    } finally {
      await harness.close();
    }
  }, 90_000);

  it('renews an extended lease on its period, not for every table it acknowledges', async () => {
    const shard = 'shard-renew';
    // A 60 s lease: renewals every 5 s, far longer than the test's new tables take.
    const table = routeTable({ shard, homeCluster: a.name, clusters: [clusterRoute(a, [bucket(ns)])], leaseSeconds: 60 });
    await publish(table);
    const harness = await startTestProxy({ table: undefined, credentialsPath: testbed().kubeconfigPath, dir: join(dir, shard), source: source(shard) });
    try {
      // Not extended yet: the first acknowledgement is followed by a renewal at once, which extends.
      await settles(async () => expect((await readyz(harness)).status).toBe(200));
      const before = renewals.get(shard) ?? 0;
      // Each table acknowledged before the next is published, so that none could share another's renewal.
      for (let version = 2; version <= 5; version++) {
        await publish({ ...table, version });
        await settles(() => expect(acks.some((ack) => ack.shard === shard && ack.version === version)).toBe(true));
      }
      // One periodic renewal may fall in this window; one per table would be four.
      expect(renewals.get(shard) ?? 0).toBeLessThanOrEqual(before + 1);
      expect((await readyz(harness)).status).toBe(200);
    } finally {
      await harness.close();
    }
  }, 60_000);

  it('starts and serves from its stored table while NATS is down', async () => {
    const shard = 'shard-stored';
    const table = routeTable({ shard, homeCluster: a.name, clusters: [clusterRoute(a, [bucket(ns)])], leaseSeconds: 60 });
    await publish(table);
    const first = await startTestProxy({ table: undefined, credentialsPath: testbed().kubeconfigPath, dir: join(dir, shard), source: source(shard) });
    await settles(() => expect(first.proxy.controller.current?.table.version).toBe(1));
    // Serving means the hub extended its lease; the extension is stored with the table.
    await settles(async () => expect((await readyz(first)).status).toBe(200));
    await first.close();

    await nats.stop();
    try {
      const second = await startTestProxy({ table: undefined, credentialsPath: testbed().kubeconfigPath, dir: join(dir, shard), source: source(shard) });
      try {
        expect((await readyz(second)).status).toBe(200);
        expect((await fetch(`${second.proxy.apiUrl}/api/v1/namespaces/${ns}/configmaps/cm`)).status).toBe(200);
        const metrics = await (await fetch(`${second.proxy.opsUrl}/metrics`)).text();
        expect(metrics).toMatch(/ctrlmesh_proxy_route_source_connected\{[^}]*\} 0/);
      } finally {
        await second.close();
      }
    } finally {
      await nats.start();
    }
  }, 90_000);
});
