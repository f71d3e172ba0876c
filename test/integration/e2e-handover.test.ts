import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentHandle } from '../../src/agent/index.js';
import { HUB_DEFAULTS, type HubHandle, type OperatorStatus } from '../../src/hub/index.js';
import { RECONCILED_BY } from '../../src/sample-operator/reconciler.js';
import { GROUP, apply, bootstrapTokens, ensureNamespace, eventually, logger, privateNats, runAgent, runHub } from './control-fixture.js';
import { startE2eShard, type E2eShard, type ReconcileRecord } from './helpers/e2e-shard.js';
import { expectGrantsAfterFence, expectOneOwnerAtATime, ownershipPeriods, publishedOwners } from './helpers/handover-timeline.js';
import { bucket } from './helpers/proxy.js';
import { cluster, kubeConfigFor, uniqueName } from './helpers/testbed.js';

const HASH = 'ctrlmesh.kusionstack.io/sharding-hash';
const PROXY_LEASE_SECONDS = 5;
/**
 * One workload namespace per bucket: every unit of both clusters holds one of this test's objects, so whichever units
 * the planner moves to the third shard (it balances by every ConfigMap of the shared bed, which other tests change
 * while this one runs), objects change owner.
 */
function namespacePerBucket(prefix: string): string[] {
  const byBucket = new Map<number, string>();
  for (let k = 0; byBucket.size < 32; k++) {
    const name = `${prefix}-${k}`;
    if (!byBucket.has(bucket(name))) byBucket.set(bucket(name), name);
  }
  return [...byBucket.values()];
}

/** Adding a shard to a running, busy operator: the data-plane "Must show" end to end. */
describe('adding a shard live: units move with never two shards reconciling an object, no operator restarted', () => {
  const beds = [cluster(0), cluster(1)];
  const clusterNames = beds.map((b) => b.name);
  const admins = beds.map((b) => kubeConfigFor(b).makeApiClient(CoreV1Api));
  const home = kubeConfigFor(beds[0]!);
  const opNamespace = uniqueName('e2e-op');
  const app = uniqueName('e2e-app');
  const prefix = 'e2e';
  const operator = `${opNamespace}/${prefix}-root`;
  const shardName = (i: number): string => `${clusterNames[0]}/${prefix}-${i}-normal`;
  const namespaces = namespacePerBucket(uniqueName('e2e-w'));
  const objects = clusterNames.flatMap((c) => namespaces.map((ns) => ({ cluster: c, namespace: ns, key: `${ns}/cm` })));
  const records: ReconcileRecord[] = [];
  const shards: E2eShard[] = [];
  const agents: AgentHandle[] = [];
  let nats: Awaited<ReturnType<typeof privateNats>>;
  let hub: HubHandle;
  let dir: string;
  const churn = new AbortController();
  let churning: Promise<void> | undefined;

  const root = (size: number): Parameters<typeof apply>[1] => ({
    apiVersion: `${GROUP}/v1alpha1`,
    kind: 'ShardingConfig',
    metadata: { name: `${prefix}-root`, namespace: opNamespace },
    spec: {
      root: {
        prefix,
        targetStatefulSet: 'sample-operator',
        auto: { shardingSize: size, everyShardReplicas: 1 },
        resourceSelector: [{ apiGroups: [''], resources: ['configmaps'] }],
        // Every registered cluster: the planner spreads the (cluster, bucket) units over the shards.
        clusters: {},
      },
      controller: { leaderElectionName: 'e2e-leader', multicluster: true },
      selector: { matchLabels: { app: 'sample-operator' } },
    },
  });
  const status = (): OperatorStatus => {
    const found = hub.status().operators.find((o) => o.operator === operator);
    if (!found) throw new Error(`the hub has no route tables for ${operator} yet`);
    return found;
  };
  /** The published owner of every unit `<bucket>@<cluster>` (throws if a unit has two). */
  const owners = (): Map<string, string> => publishedOwners(status());
  const unitOf = (o: { cluster: string; namespace: string }): string => `${bucket(o.namespace)}@${o.cluster}`;
  /** Settled: the expected shards publish every unit once and no handover is in flight. */
  const settled = async (size: number): Promise<Map<string, string>> =>
    eventually(() => {
      const s = status();
      expect(s.shards.map((x) => x.name)).toEqual(Array.from({ length: size }, (_, i) => shardName(i + 1)));
      expect(s.pending).toEqual([]);
      const found = owners();
      expect(found.size).toBe(32 * clusterNames.length);
      // A new shard takes units only once its proxy serves: settled is when every shard owns some.
      expect(new Set(found.values()).size).toBe(size);
      return found;
    }, 30_000);
  /** Waits until every object was reconciled by its unit's owner in a reconcile that started after `since`, and carries no other shard's stamp. */
  const reconciledByOwners = async (ownership: Map<string, string>, since: number): Promise<void> => {
    await eventually(
      async () => {
        for (const o of objects) {
          const owner = ownership.get(unitOf(o));
          expect(records.some((r) => r.cluster === o.cluster && r.key === o.key && r.shard === owner && r.started >= since)).toBe(true);
        }
        for (const [i, admin] of admins.entries()) {
          for (const ns of namespaces) {
            const cm = await admin.readNamespacedConfigMap({ name: 'cm', namespace: ns });
            // Stamped by its owner, or stamp just cleared by the churn and not yet written again: never another shard's.
            expect([ownership.get(`${bucket(ns)}@${clusterNames[i]}`), undefined]).toContain(cm.metadata?.annotations?.[RECONCILED_BY]);
          }
        }
      },
      45_000,
      250,
    );
  };

  /** Keeps the operators busy: every 100 ms one object per cluster changes and loses its stamp, so its owner writes it again. */
  const startChurn = async (): Promise<void> => {
    const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    for (let tick = 0; !churn.signal.aborted; tick++) {
      const namespace = namespaces[tick % namespaces.length] as string;
      const body = { data: { tick: String(tick) }, metadata: { annotations: { [RECONCILED_BY]: null } } };
      // A write refused under load is simply made again at a later tick.
      await Promise.all(admins.map((api) => api.patchNamespacedConfigMap({ name: 'cm', namespace, body }, mergePatch).catch(() => undefined)));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-e2e-'));
    nats = await privateNats();
    // Default debounce (200 ms) and health thresholds: a loaded machine must not turn a cluster Unknown mid-test.
    hub = await runHub(nats.nats, 'e2e-hub', { tokens: bootstrapTokens(...beds.map((b) => b.name)), debounceMs: HUB_DEFAULTS.debounceMs, health: HUB_DEFAULTS.health, proxyLeaseSeconds: PROXY_LEASE_SECONDS, handoverHistory: 500 });
    await eventually(() => expect(hub.isLeader()).toBe(true));
    for (const bed of beds) agents.push(await runAgent({ registryName: bed.name, bed, nats: nats.nats, webhook: undefined }));
    // The workload: a ConfigMap in every namespace of both clusters, labelled with its bucket as the agents label them.
    for (const admin of admins) {
      await Promise.all(
        namespaces.map(async (ns) => {
          await admin.createNamespace({ body: { metadata: { name: ns } } });
          await admin.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'cm', labels: { app, [HASH]: String(bucket(ns)) } }, data: { tick: '-1' } } });
        }),
      );
    }
    await ensureNamespace(home, opNamespace);
    await apply(home, root(2));
    await settled(2);
    for (const i of [1, 2]) shards.push(await startE2eShard({ nats: nats.nats, operator, shard: shardName(i), clusters: clusterNames, selector: `app=${app}`, dir: join(dir, `shard-${i}`), records }));
    churning = startChurn();
  }, 120_000);

  afterAll(async () => {
    churn.abort();
    await churning;
    for (const s of shards) await s.stop();
    await home
      .makeApiClient(CustomObjectsApi)
      .deleteNamespacedCustomObject({ group: GROUP, version: 'v1alpha1', namespace: opNamespace, plural: 'shardingconfigs', name: `${prefix}-root` })
      .catch(() => undefined);
    for (const a of agents) await a.stop();
    await hub?.stop();
    await nats?.cleanup();
    for (const admin of admins) for (const ns of namespaces) await admin.deleteNamespace({ name: ns }).catch(() => undefined);
    await admins[0]?.deleteNamespace({ name: opNamespace }).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  it('a third shard gets units by revoke -> ack/lease -> grant; the operators logs show one owner at a time', async () => {
    const before = await settled(2);
    await reconciledByOwners(before, 0);
    const versionsBefore = shards.map((s) => s.proxy.proxy.controller.current?.table.version ?? 0);

    // The third shard's proxy and operator run before the hub knows the shard, so its operator is live through the
    // handover and sees the moved objects only when its proxy applies the grant.
    const third = await startE2eShard({
      nats: nats.nats,
      operator,
      shard: shardName(3),
      clusters: clusterNames,
      selector: `app=${app}`,
      dir: join(dir, 'shard-3'),
      records,
      layout: shards[0]?.proxy.proxy.controller.current?.table,
    });
    shards.push(third);
    await eventually(() => expect(third.starts).toBe(1));
    const addedAt = Date.now();
    await apply(home, root(3));
    const after = await settled(3);

    // The handovers of this change, from the hub's timeline.
    const moves = status().history.filter((h) => h.revokedAt >= addedAt);
    const lastGrant = Math.max(...moves.map((h) => h.grantedAt as number));
    await reconciledByOwners(after, lastGrant);
    const finished = Date.now();
    churn.abort();
    await churning;

    // Every unit has exactly one owner (owners() throws otherwise) and the new shard got some.
    expect([...after.values()].filter((s) => s === shardName(3)).length).toBeGreaterThan(0);
    // The first two operators and proxies were never restarted; the proxy of every shard that gave units away applied
    // the new tables live (a shard the balance left alone gets no new table).
    const gave = new Set(moves.map((h) => h.from));
    expect(gave.size).toBeGreaterThan(0);
    for (const [i, s] of shards.slice(0, 2).entries()) {
      expect(s.operator.exitCode).toBeNull();
      expect(s.operator.pid).toBe(s.pid);
      expect(s.starts).toBe(1);
      if (gave.has(shardName(i + 1))) expect(s.proxy.proxy.controller.current?.table.version).toBeGreaterThan(versionsBefore[i] as number);
    }

    // The hub's timeline: each moved unit was granted only after its old owner acknowledged the revocation or its lease ran out.
    const changed = [...after].filter(([unit, shard]) => before.get(unit) !== shard).map(([unit]) => unit);
    expect(changed.length).toBeGreaterThan(0);
    expectGrantsAfterFence(moves, PROXY_LEASE_SECONDS);
    // The new shard served before any unit moved to it, so no move waited for a lease to run out: a unit is unserved
    // from its revocation to its grant, one table round trip through the old owner's proxy.
    expect(moves.every((h) => h.grantedBy === 'ack')).toBe(true);
    const longestGapMs = Math.max(...moves.map((h) => (h.grantedAt as number) - h.revokedAt));
    expect(longestGapMs).toBeLessThan(PROXY_LEASE_SECONDS * 1000);

    // The operators' records, object by object.
    let ownerChanges = 0;
    for (const o of objects) {
      const mine = records.filter((r) => r.cluster === o.cluster && r.key === o.key).sort((a, b) => a.started - b.started);
      // Only while the timeline says it owns the unit: from its grant on (it saw the object only through a table
      // granting it), and a write before the hub saw the revocation acknowledged or the lease expired.
      const periods = ownershipPeriods(unitOf(o), before, after, moves, PROXY_LEASE_SECONDS);
      const reconciledBy = expectOneOwnerAtATime(`${o.cluster} ${o.key}`, mine, periods);
      if (reconciledBy.size > 1) ownerChanges += 1;
    }
    expect(ownerChanges).toBeGreaterThan(0);
    logger.info(
      { units: changed.length, objectsMoved: ownerChanges, reconciles: records.length, gave: [...gave], longestGapMs, ms: finished - addedAt },
      'shard added live',
    );
  });
});
