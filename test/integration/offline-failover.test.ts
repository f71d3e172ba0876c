import type { KubernetesObject } from '@kubernetes/client-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentHandle } from '../../src/agent/index.js';
import type { HubHandle } from '../../src/hub/index.js';
import type { RouteTable } from '../../src/transport/index.js';
import { apply, bootstrapTokens, deleteShardingConfigs, ensureNamespace, eventually, GROUP, logger, observe, privateNats, routeTables, runAgent, runHub, serveShards } from './control-fixture.js';
import { cluster, kubeConfigFor, uniqueName } from './helpers/testbed.js';

const NS = 'operator-offline';
const OPERATOR = `${NS}/fo`;

/** The same multicluster root in every cluster: one planned shard there, all of them sharing every cluster's units. */
const root: KubernetesObject & { spec: unknown } = {
  apiVersion: `${GROUP}/v1alpha1`,
  kind: 'ShardingConfig',
  metadata: { name: 'fo', namespace: NS },
  spec: {
    root: { prefix: 'fo', targetStatefulSet: 'fo', auto: { shardingSize: 1, everyShardReplicas: 1 }, resourceSelector: [{ apiGroups: [''], resources: ['configmaps'] }], clusters: {} },
    controller: { leaderElectionName: 'fo-leader', multicluster: true },
    selector: { matchLabels: { app: 'fo' } },
  },
};

/** How many units each shard's table grants. */
function owned(tables: readonly RouteTable[]): Record<string, number> {
  return Object.fromEntries(tables.map((t) => [t.shard, t.clusters.reduce((n, c) => n + c.buckets.length, 0)]));
}

describe('a multicluster operator fails over from an Offline cluster (hub --move-units-of-offline-clusters)', () => {
  const a = uniqueName('off-a');
  const b = uniqueName('off-b');
  const shardA = `${a}/fo-1-normal`;
  const shardB = `${b}/fo-1-normal`;
  let nats: Awaited<ReturnType<typeof privateNats>>;
  let hub: HubHandle;
  let agentA: AgentHandle | undefined;
  let agentB: AgentHandle | undefined;
  let nc: NatsConnection;
  // No proxy runs here: a revoked unit is granted after the lease (1 s) and the margin (0.5 s).
  const hubOverrides = { tokens: bootstrapTokens(a, b), moveUnitsOfOfflineClusters: true, proxyLeaseSeconds: 1, grantMarginMs: 500 };

  beforeAll(async () => {
    nats = await privateNats();
    hub = await runHub(nats.nats, 'hub-offline', hubOverrides);
    agentA = await runAgent({ registryName: a, bed: cluster(0), nats: nats.nats, webhook: undefined });
    agentB = await runAgent({ registryName: b, bed: cluster(1), nats: nats.nats, webhook: undefined });
    nc = await observe(nats.nats);
    for (const bed of [0, 1]) {
      const kc = kubeConfigFor(cluster(bed));
      await ensureNamespace(kc, NS);
      await eventually(() => apply(kc, root));
    }
    // Both shards' proxies are up, as far as the hub can tell: units may move to either.
    await serveShards(nats.nats, nc, OPERATOR, shardA, shardB);
  });

  afterAll(async () => {
    for (const bed of [0, 1]) await deleteShardingConfigs(kubeConfigFor(cluster(bed)), NS, 'fo');
    await nc?.close();
    await agentA?.stop();
    await agentB?.stop();
    await hub?.stop();
    await nats?.cleanup();
  });

  it("hands an Offline cluster's shard's units to the shard elsewhere, and shares them again when it is back", async () => {
    await eventually(async () => {
      const shares = owned(await routeTables(nc, OPERATOR));
      expect(Object.keys(shares).sort()).toEqual([shardA, shardB].sort());
      expect((shares[shardA] ?? 0) + (shares[shardB] ?? 0)).toBe(64);
      expect(shares[shardB]).toBeGreaterThan(0);
    }, 30_000);
    // Cluster b's agent goes (its cluster stays up): Offline after 5 s without heartbeats.
    await agentB?.stop();
    agentB = undefined;
    await eventually(() => expect(hub.status().clusters.find((c) => c.name === b)?.health).toBe('Offline'), 20_000);
    const failedOver = await eventually(async () => {
      const tables = await routeTables(nc, OPERATOR);
      expect(owned(tables)).toEqual({ [shardA]: 64, [shardB]: 0 });
      return tables;
    }, 20_000);
    // Every unit of both clusters, each once: b's objects are reconciled by the shard in a.
    const units = failedOver.flatMap((t) => t.clusters.flatMap((c) => c.buckets.map((bucket) => `${c.name}:${bucket}`)));
    expect(new Set(units).size).toBe(64);
    expect(new Set(failedOver.find((t) => t.shard === shardA)?.clusters.map((c) => c.name))).toEqual(new Set([a, b]));
    // A hub started while b is down has never heard from it: it counts b Offline after 5 s and b's shard ends with
    // nothing. (On a loaded machine a few units may pass through b's shard meanwhile: docs/control-plane.md.)
    await hub.stop();
    hub = await runHub(nats.nats, 'hub-offline-2', hubOverrides);
    await eventually(() => expect(hub.status().clusters.find((c) => c.name === b)?.health).toBe('Offline'), 20_000);
    await eventually(async () => expect(owned(await routeTables(nc, OPERATOR))).toEqual({ [shardA]: 64, [shardB]: 0 }), 20_000);
    agentB = await runAgent({ registryName: b, bed: cluster(1), nats: nats.nats, webhook: undefined });
    await eventually(async () => {
      const shares = owned(await routeTables(nc, OPERATOR));
      expect(shares[shardB]).toBeGreaterThan(0);
      expect((shares[shardA] ?? 0) + (shares[shardB] ?? 0)).toBe(64);
    }, 30_000);
    logger.info({ shares: owned(await routeTables(nc, OPERATOR)) }, 'shared again after the cluster came back');
  });
});
