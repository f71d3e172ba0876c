import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ApiextensionsV1Api,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  PatchStrategy,
  VersionApi,
  setHeaderOptions,
  type KubernetesObject,
} from '@kubernetes/client-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentHandle } from '../../src/agent/index.js';
import { parseKubeVersion, resolveTool, startApiServer, writeKubeconfig, type ApiServerHandle } from '../../src/dev/index.js';
import { HUB_DEFAULTS, type HubHandle, type OperatorStatus } from '../../src/hub/index.js';
import { RECONCILED_BY } from '../../src/sample-operator/reconciler.js';
import { bucketOf } from '../../src/sharding/index.js';
import type { RouteTable } from '../../src/transport/index.js';
import { fooCrd } from '../node/sample-controller.js';
import { GROUP, apply, bootstrapTokens, eventually, logger, observe, privateNats, routeTables, runAgent, runHub } from './control-fixture.js';
import { startE2eShard, startSampleControllerShard, type E2eShard, type ReconcileRecord, type SampleControllerShard, type SyncRecord } from './helpers/e2e-shard.js';
import { expectGrantsAfterFence, expectOneOwnerAtATime, ownershipPeriods, publishedOwners } from './helpers/handover-timeline.js';
import { silent } from './helpers/proxy.js';
import { kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

const MESH_LABEL_PREFIX = `${GROUP}/`;
const PROXY_LEASE_SECONDS = 5;
const WORKLOAD_NAMESPACES = 8;
/** The agent's hash here: FNV-1a, whose buckets are hash ranges (what a shard selector can name). */
const HASH = { algorithm: 'fnv-range', bucketCount: 32 } as const;
const FOOS = { group: 'samplecontroller.k8s.io', version: 'v1alpha1', plural: 'foos' } as const;
/** The proxies' identities, one per shard, so the audit log tells their requests apart from everyone else's and each other's. */
const PROXY_USER_PREFIX = 'ctrlmesh-proxy-';

const nsBucket = (namespace: string): number => bucketOf(namespace, HASH);

/** A unique namespace name whose bucket is in [lo, hi): spreads the workload over every shard, before and after. */
function namespaceIn(prefix: string, lo: number, hi: number): string {
  for (;;) {
    const name = uniqueName(prefix);
    const b = nsBucket(name);
    if (b >= lo && b < hi) return name;
  }
}

interface AuditEvent {
  auditID: string;
  requestReceivedTimestamp: string;
  stage: string;
  verb: string;
  requestURI: string;
  user: { username: string };
  objectRef?: { resource?: string; namespace?: string; apiGroup?: string };
  responseStatus?: { code?: number };
}

/**
 * Shard selectors end to end, on both minors with the same ShardingConfigs: the sample operator (ConfigMaps) and the
 * upstream k8s.io/sample-controller (Foos, and the Deployments it creates), three shards each, over a workload nobody
 * labelled. The cluster is one kube-apiserver of the bed's minor on the bed's etcd, started here because it keeps an
 * audit log. On a server with shard selectors (the v1.37 bed) nothing may be labelled and the proxies must send
 * `shardSelector`; on v1.33 the agent labels and the proxies send the hash label. Either way one owner per object,
 * also while a 4th shard takes buckets under churn.
 */
describe('shard selectors: the same operators, sharded by the server (1.36+) or by labels (before), one owner per object', () => {
  const kubeVersion = parseKubeVersion(testbed().kubeVersion, 'the test bed');
  const opNamespace = uniqueName('ss-op');
  const fooNamespace = uniqueName('ss-foo-op');
  const app = uniqueName('ss-app');
  // One namespace per 4-bucket slice: every shard owns some, of 3 and of 4, and some move when the 4th comes.
  const namespaces = Array.from({ length: WORKLOAD_NAMESPACES }, (_, i) => namespaceIn(`ss-w${i}`, (i * 32) / WORKLOAD_NAMESPACES, ((i + 1) * 32) / WORKLOAD_NAMESPACES));
  const cmPrefix = 'cm';
  const fooPrefix = 'foo';
  const operator = `${opNamespace}/${cmPrefix}-root`;
  const fooOperator = `${fooNamespace}/${fooPrefix}-root`;
  const records: ReconcileRecord[] = [];
  const syncs: SyncRecord[] = [];
  const shards: E2eShard[] = [];
  const fooShards: SampleControllerShard[] = [];
  let server: ApiServerHandle;
  let clusterName: string;
  let dir: string;
  let auditPath: string;
  let nats: Awaited<ReturnType<typeof privateNats>>;
  let observer: NatsConnection;
  let hub: HubHandle;
  let agent: AgentHandle;
  let core: CoreV1Api;
  let apps: AppsV1Api;
  let custom: CustomObjectsApi;
  /** Whether the server offers shard selectors (its /version minor is 36 or later; the bed turns the gate on). */
  let serverShards = false;
  let minor = '';
  const churn = new AbortController();
  let churning: Promise<void> | undefined;

  const shardName = (prefix: string, i: number): string => `${clusterName}/${prefix}-${i}-normal`;
  const root = (namespace: string, prefix: string, target: string, size: number, resources: { apiGroups: string[]; resources: string[] }[]): Parameters<typeof apply>[1] => ({
    apiVersion: `${GROUP}/v1alpha1`,
    kind: 'ShardingConfig',
    metadata: { name: `${prefix}-root`, namespace },
    spec: {
      root: { prefix, targetStatefulSet: target, auto: { shardingSize: size, everyShardReplicas: 1 }, resourceSelector: resources },
      controller: { leaderElectionName: `${prefix}-leader` },
      selector: { matchLabels: { app: target } },
    },
  });
  const cmRoot = (size: number): Parameters<typeof apply>[1] => root(opNamespace, cmPrefix, 'sample-operator', size, [{ apiGroups: [''], resources: ['configmaps'] }]);
  const fooRoot = (size: number): Parameters<typeof apply>[1] =>
    root(fooNamespace, fooPrefix, 'sample-controller', size, [
      { apiGroups: ['samplecontroller.k8s.io'], resources: ['foos'] },
      { apiGroups: ['apps'], resources: ['deployments'] },
    ]);

  const status = (op: string): OperatorStatus => {
    const found = hub.status().operators.find((o) => o.operator === op);
    if (!found) throw new Error(`the hub has no route tables for ${op} yet`);
    return found;
  };
  const owners = (op: string): Map<string, string> => publishedOwners(status(op));
  const unitOf = (namespace: string): string => `${nsBucket(namespace)}@${clusterName}`;
  /** Settled: the expected shards, each owning some units, publish all 32 once and no handover is in flight. */
  const settled = async (op: string, prefix: string, size: number): Promise<Map<string, string>> =>
    eventually(() => {
      const s = status(op);
      expect(s.shards.map((x) => x.name)).toEqual(Array.from({ length: size }, (_, i) => shardName(prefix, i + 1)));
      expect(s.pending).toEqual([]);
      const found = owners(op);
      expect(found.size).toBe(32);
      expect(new Set(found.values()).size).toBe(size);
      return found;
    }, 60_000);
  /** Waits until every ConfigMap was reconciled by its unit's owner in a reconcile that started at `since` or later, and carries no other shard's stamp. */
  const reconciledByOwners = async (ownership: Map<string, string>, since: number): Promise<void> => {
    await eventually(
      async () => {
        for (const ns of namespaces) {
          const owner = ownership.get(unitOf(ns));
          expect(records.some((r) => r.key === `${ns}/cm` && r.shard === owner && r.started >= since), `${ns}/cm reconciled by ${owner}`).toBe(true);
          const cm = await core.readNamespacedConfigMap({ name: 'cm', namespace: ns });
          // Stamped by its owner, or the stamp just cleared by the churn and not yet written again: never another shard's.
          expect([owner, undefined]).toContain(cm.metadata?.annotations?.[RECONCILED_BY]);
        }
      },
      60_000,
      250,
    );
  };
  /** Every ConfigMap changes every 500 ms and loses its stamp, so its owner writes it again. */
  const startChurn = async (): Promise<void> => {
    const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    for (let tick = 0; !churn.signal.aborted; tick++) {
      const body = { data: { tick: String(tick) }, metadata: { annotations: { [RECONCILED_BY]: null } } };
      // A write refused under load is simply made again at the next tick.
      await Promise.all(namespaces.map((namespace) => core.patchNamespacedConfigMap({ name: 'cm', namespace, body }, mergePatch).catch(() => undefined)));
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  };
  /** A kubeconfig for shard `i`'s proxy with an identity of its own (`ctrlmesh-proxy-<prefix>-<i>`, an admin). */
  const credentials = async (prefix: string, i: number): Promise<string> => {
    const path = join(dir, `credentials-${prefix}-${i}`);
    const identity = await server.issueClientCertificate(`${PROXY_USER_PREFIX}${prefix}-${i}`, ['system:masters']);
    await writeKubeconfig(path, [{ ...server, clientCertPem: identity.certPem, clientKeyPem: identity.keyPem }]);
    return path;
  };
  const meshLabels = (obj: KubernetesObject): string[] => Object.keys(obj.metadata?.labels ?? {}).filter((k) => k.startsWith(MESH_LABEL_PREFIX));

  /**
   * What the API server executed for the proxies (its audit log): every list and watch of the workload's kinds went
   * with a shard selector and no hash label selector on a server with shard selectors, with the hash label before.
   */
  const expectAudited = async (hashKey: string, when: string, since = 0): Promise<void> => {
    // What the API server executed for the proxies: every list and watch of the workload's kinds.
    const events = (await readFile(auditPath, 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as AuditEvent)
      // A list is logged when complete; a watch still open only as started: one event per request.
      .filter((e) => (e.stage === 'ResponseComplete' || (e.stage === 'ResponseStarted' && e.verb === 'watch')) && e.user.username.startsWith(PROXY_USER_PREFIX))
      .filter((e, i, all) => all.findIndex((o) => o.auditID === e.auditID) === i)
      .filter((e) => (e.verb === 'list' || e.verb === 'watch') && ['configmaps', 'foos', 'deployments'].includes(e.objectRef?.resource ?? ''));
    const byResource = new Map<string, AuditEvent[]>();
    for (const e of events) byResource.set(e.objectRef?.resource as string, [...(byResource.get(e.objectRef?.resource as string) ?? []), e]);
    console.log(
      [
        `shard-selectors audit ${when} (kube ${minor}): ${events.filter((e) => e.verb === 'list').length} lists and ${events.filter((e) => e.verb === 'watch').length} watches of the workload's kinds by the proxies; the first of each kind${since > 0 ? ' since the apply' : ''}:`,
        ...[...byResource.values()]
          .map((es) => es.filter((e) => Date.parse(e.requestReceivedTimestamp) >= since))
          .flatMap((es) => [es.find((e) => e.verb === 'list'), es.find((e) => e.verb === 'watch')])
          .filter((e) => e !== undefined)
          .map((e) => `  ${e.user.username} ${e.verb} -> ${e.responseStatus?.code}: ${decodeURIComponent(e.requestURI)}`),
      ].join('\n'),
    );
    expect([...byResource.keys()].sort()).toEqual(['configmaps', 'deployments', 'foos']);
    for (const [resource, es] of byResource) expect(new Set(es.map((e) => e.verb)), resource).toEqual(new Set(['list', 'watch']));
    const wrong: string[] = [];
    const empty: string[] = [];
    const line = (e: AuditEvent): string => `${e.user.username} ${e.verb} -> ${e.responseStatus?.code}: ${decodeURIComponent(e.requestURI)}`;
    for (const e of events) {
      const query = new URL(e.requestURI, 'https://apiserver').searchParams;
      const labelSelector = query.get('labelSelector') ?? '';
      // A shard that owns no bucket (the new one between its first table and its grant) asks for `key,!key`: valid,
      // matching nothing, on either kind of server (src/proxy/routes/shard-view.ts). Counted, not a selection by label.
      if (labelSelector === `${hashKey},!${hashKey}` && !query.has('shardSelector')) {
        empty.push(line(e));
        continue;
      }
      const byHashLabel = labelSelector.includes(hashKey);
      const byShardSelector = /^shardRange\(object\.metadata\.namespace, /.test(query.get('shardSelector') ?? '');
      if (serverShards ? !byShardSelector || byHashLabel : byShardSelector || query.has('shardSelector') || !byHashLabel) wrong.push(line(e));
    }
    if (empty.length > 0) console.log(`shard-selectors audit ${when}: ${empty.length} lists/watches of a shard owning nothing (match-nothing selector):\n  ${empty.join('\n  ')}`);
    expect(wrong, serverShards ? 'lists and watches without a shard selector, or with the hash label' : 'lists and watches without the hash label').toEqual([]);
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-shard-selectors-'));
    auditPath = join(dir, 'audit.log');
    // One kube-apiserver of the bed's minor, over the bed's etcd, auditing every request: the shared bed's servers
    // keep no audit log, and the proof that the proxies sent shard selectors is the request URIs the server executed.
    server = await startApiServer({ etcd: testbed().etcd, name: uniqueName('ss'), dir: join(dir, 'server'), logger: silent, auditLogPath: auditPath, kubeVersion });
    clusterName = server.name;
    const kc = kubeConfigFor(server);
    core = kc.makeApiClient(CoreV1Api);
    apps = kc.makeApiClient(AppsV1Api);
    custom = kc.makeApiClient(CustomObjectsApi);
    const version = await kc.makeApiClient(VersionApi).getCode();
    minor = `${version.major}.${version.minor}`;
    serverShards = Number(version.major) > 1 || Number.parseInt(version.minor, 10) >= 36;

    // The Foo CRD before the agent, which watches foos as the sample-controller root's related resource.
    await KubernetesObjectApi.makeApiClient(kc).create(fooCrd());
    await eventually(() => custom.listClusterCustomObject(FOOS), 30_000, 250);

    // The workload, before the mesh is installed (as on a running cluster), with no ControllerMesh label: only the
    // sample operator's own selector label on the ConfigMaps.
    for (const ns of namespaces) {
      await core.createNamespace({ body: { metadata: { name: ns } } });
      await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'cm', labels: { app } }, data: { tick: '-1' } } });
      await custom.createNamespacedCustomObject({
        ...FOOS,
        namespace: ns,
        body: { apiVersion: `${FOOS.group}/${FOOS.version}`, kind: 'Foo', metadata: { name: 'foo' }, spec: { deploymentName: `foo-${ns}`, replicas: 1 } },
      });
    }

    nats = await privateNats();
    observer = await observe(nats.nats);
    hub = await runHub(nats.nats, 'ss-hub', { tokens: bootstrapTokens(clusterName), debounceMs: HUB_DEFAULTS.debounceMs, health: HUB_DEFAULTS.health, proxyLeaseSeconds: PROXY_LEASE_SECONDS, handoverHistory: 500 });
    await eventually(() => expect(hub.isLeader()).toBe(true));
    agent = await runAgent({ registryName: clusterName, bed: server, nats: nats.nats, webhook: undefined, hash: { algorithm: HASH.algorithm, bucketCount: HASH.bucketCount } });

    for (const ns of [opNamespace, fooNamespace]) await core.createNamespace({ body: { metadata: { name: ns } } });
    await apply(kc, cmRoot(3));
    await apply(kc, fooRoot(3));
    await settled(operator, cmPrefix, 3);
    await settled(fooOperator, fooPrefix, 3);

    const binary = (await resolveTool('sample-controller')).path;
    const clusters = [clusterName];
    for (const i of [1, 2, 3]) {
      shards.push(
        await startE2eShard({ nats: nats.nats, operator, shard: shardName(cmPrefix, i), clusters, selector: `app=${app}`, dir: join(dir, `cm-${i}`), records, credentialsPath: await credentials(cmPrefix, i) }),
      );
      fooShards.push(
        await startSampleControllerShard({ nats: nats.nats, operator: fooOperator, shard: shardName(fooPrefix, i), clusters, binary, dir: join(dir, `foo-${i}`), records: syncs, credentialsPath: await credentials(fooPrefix, i) }),
      );
    }
  }, 240_000);

  afterAll(async () => {
    churn.abort();
    await churning;
    for (const s of [...shards, ...fooShards]) await s.stop().catch(() => undefined);
    await agent?.stop();
    await hub?.stop();
    await observer?.close();
    await nats?.cleanup();
    if (server) {
      for (const ns of [...namespaces, opNamespace, fooNamespace]) await core.deleteNamespace({ name: ns }).catch(() => undefined);
      // This server is the file's own: nothing else uses its Foo CRD.
      await kubeConfigFor(server).makeApiClient(ApiextensionsV1Api).deleteCustomResourceDefinition({ name: 'foos.samplecontroller.k8s.io' }).catch(() => undefined);
      await server.stop();
    }
    await rm(dir, { recursive: true, force: true });
  });

  it('every ConfigMap is reconciled and every Foo synced by exactly one shard, its namespace bucket’s owner; each Foo has its Deployment', async () => {
    const cmOwners = await settled(operator, cmPrefix, 3);
    const fooOwners = await settled(fooOperator, fooPrefix, 3);
    await reconciledByOwners(cmOwners, 0);
    await eventually(
      async () => {
        for (const ns of namespaces) {
          expect(syncs.some((s) => s.key === `${ns}/foo` && s.shard === fooOwners.get(unitOf(ns))), `${ns}/foo synced by ${fooOwners.get(unitOf(ns))}`).toBe(true);
          await apps.readNamespacedDeployment({ name: `foo-${ns}`, namespace: ns });
        }
      },
      90_000,
      500,
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}\nsample-controller logs:\n${fooShards.map((s) => `${s.name}:\n${s.log.slice(-20).join('\n')}`).join('\n')}`);
    });
    for (const ns of namespaces) {
      expect(new Set(records.filter((r) => r.key === `${ns}/cm`).map((r) => r.shard)), `${ns}/cm`).toEqual(new Set([cmOwners.get(unitOf(ns))]));
      expect(new Set(syncs.filter((s) => s.key === `${ns}/foo`).map((s) => s.shard)), `${ns}/foo`).toEqual(new Set([fooOwners.get(unitOf(ns))]));
    }
    // Every shard of each operator has work here (one namespace per 4-bucket slice).
    expect(new Set(records.map((r) => r.shard)).size).toBe(3);
    expect(new Set(syncs.map((s) => s.shard)).size).toBe(3);
    logger.info({ minor, reconciles: records.length, syncs: syncs.length }, 'one owner per object');
  }, 180_000);

  it('with shard selectors (1.36+): shardSelector in every route table, no mesh label anywhere, shardSelector on every list and watch; before: the hash label', async () => {
    const tables = [...(await routeTables(observer, operator)), ...(await routeTables(observer, fooOperator))];
    expect(tables).toHaveLength(6);
    for (const t of tables) {
      expect(t.hashAlgorithm).toBe(HASH.algorithm);
      expect(t.bucketCount).toBe(HASH.bucketCount);
      for (const c of t.clusters) expect(c.selection, `${t.shard} ${c.name}`).toBe(serverShards ? 'shardSelector' : undefined);
    }
    const hashKey = (tables[0] as RouteTable).labels.hash;
    // The workload as stored: the namespace, its ConfigMap, its Foo and the Foo's Deployment.
    const workload = async (ns: string): Promise<KubernetesObject[]> => [
      await core.readNamespace({ name: ns }),
      await core.readNamespacedConfigMap({ name: 'cm', namespace: ns }),
      (await custom.getNamespacedCustomObject({ ...FOOS, namespace: ns, name: 'foo' })) as KubernetesObject,
      await apps.readNamespacedDeployment({ name: `foo-${ns}`, namespace: ns }),
    ];
    const describeObj = (obj: KubernetesObject): string => `${obj.kind ?? 'Namespace'} ${obj.metadata?.namespace ?? ''}${obj.metadata?.namespace ? '/' : ''}${obj.metadata?.name}`;
    if (serverShards) {
      const labelled: string[] = [];
      for (const ns of namespaces) for (const obj of await workload(ns)) if (meshLabels(obj).length > 0) labelled.push(`${describeObj(obj)}: ${meshLabels(obj).join(', ')}`);
      expect.soft(labelled, 'workload objects carrying a mesh label').toEqual([]);
    } else {
      // The agent labels what it finds (the Deployments some moments after the sample-controller created them).
      await eventually(async () => {
        for (const ns of namespaces) for (const obj of await workload(ns)) expect(obj.metadata?.labels?.[hashKey], describeObj(obj)).toBe(String(nsBucket(ns)));
      }, 30_000, 500);
    }

    await expectAudited(hashKey, 'before the handover');
  });

  it('a 4th sample-operator shard takes its buckets under churn with never two shards reconciling one ConfigMap', async () => {
    const before = await settled(operator, cmPrefix, 3);
    churning = startChurn();
    await reconciledByOwners(before, Date.now());

    // The 4th shard's proxy and operator run before the hub knows the shard: it sees the moved objects only when
    // its proxy applies the grant.
    const fourth = await startE2eShard({
      nats: nats.nats,
      operator,
      shard: shardName(cmPrefix, 4),
      clusters: [clusterName],
      selector: `app=${app}`,
      dir: join(dir, 'cm-4'),
      records,
      layout: shards[0]?.proxy.proxy.controller.current?.table,
      credentialsPath: await credentials(cmPrefix, 4),
    });
    shards.push(fourth);
    await eventually(() => expect(fourth.starts).toBe(1));
    const addedAt = Date.now();
    await apply(kubeConfigFor(server), cmRoot(4));
    const after = await settled(operator, cmPrefix, 4);
    const moves = status(operator).history.filter((h) => h.revokedAt >= addedAt);
    expect(moves.length).toBeGreaterThan(0);
    const lastGrant = Math.max(...moves.map((h) => h.grantedAt as number));
    await reconciledByOwners(after, lastGrant);
    // A few more rounds of churn on the settled tables, then quiet.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    churn.abort();
    await churning;
    const finished = Date.now();
    await reconciledByOwners(after, lastGrant);

    expectGrantsAfterFence(moves, PROXY_LEASE_SECONDS);
    let moved = 0;
    const timeline: string[] = [];
    const at = (t: number | undefined): string => (t === undefined || !Number.isFinite(t) ? '-' : `${t >= addedAt ? '+' : '-'}${Math.abs(t - addedAt)} ms`);
    for (const ns of namespaces) {
      const unit = unitOf(ns);
      const mine = records.filter((r) => r.key === `${ns}/cm`);
      const periods = ownershipPeriods(unit, before, after, moves, PROXY_LEASE_SECONDS);
      const reconcilers = expectOneOwnerAtATime(`${ns}/cm`, mine, periods);
      // After the handover the object's last reconcile is its new owner's.
      const last = [...mine].sort((a, b) => a.started - b.started).at(-1);
      expect(last?.shard, `${ns}/cm last reconciled by`).toBe(after.get(unit));
      const oldOwner = before.get(unit) as string;
      const newOwner = after.get(unit) as string;
      if (oldOwner === newOwner) continue;
      moved += 1;
      expect(reconcilers.has(newOwner)).toBe(true);
      const h = moves.filter((m) => m.unit === unit).sort((a, b) => a.revokedAt - b.revokedAt);
      const lastOld = Math.max(...mine.filter((r) => r.shard === oldOwner).map((r) => r.finished));
      const firstNew = Math.min(...mine.filter((r) => r.shard === newOwner).map((r) => r.started));
      expect(lastOld).toBeLessThan(firstNew);
      timeline.push(
        `  ${ns}/cm unit ${unit}: ${oldOwner.split('/')[1]} -> ${newOwner.split('/')[1]}; ` +
          h.map((m) => `revoked ${at(m.revokedAt)}, acked ${at(m.acknowledgedAt)}, granted ${at(m.grantedAt)} (${m.grantedBy})`).join('; ') +
          `; last reconcile by old owner finished ${at(lastOld)}, first by new owner started ${at(firstNew)}`,
      );
    }
    expect(moved).toBeGreaterThan(0);
    // The proxies' lists and watches after the handover (the 4th shard's, the others' with their new ranges) too.
    await expectAudited((shards[0]?.proxy.proxy.controller.current?.table as RouteTable).labels.hash, 'after the handover', addedAt);
    const withObjects = new Set(namespaces.map(unitOf));
    const others = moves.filter((m) => !withObjects.has(m.unit));
    if (others.length > 0) {
      const span = (xs: number[]): string => `${at(Math.min(...xs))}..${at(Math.max(...xs))}`;
      timeline.push(
        `  ${others.length} more units moved with no workload object: ${others.map((m) => m.unit.split('@')[0]).join(',')}; revoked ${span(others.map((m) => m.revokedAt))}, granted ${span(others.map((m) => m.grantedAt as number))}`,
      );
    }
    expect(records.some((r) => r.shard === shardName(cmPrefix, 4))).toBe(true);
    // The first three operators were never restarted; their proxies applied the new tables live.
    for (const s of shards.slice(0, 3)) {
      expect(s.operator.exitCode).toBeNull();
      expect(s.starts).toBe(1);
    }
    console.log(
      [
        `shard-selectors handover (kube ${minor}, ${serverShards ? 'shard selectors' : 'labels'}): ${moves.length} units moved (${moves.filter((m) => m.grantedBy === 'ack').length} by ack), ` +
          `${moved} of ${namespaces.length} ConfigMaps changed owner, ${records.length} reconciles, ${finished - addedAt} ms from apply to quiet; t0 = apply of shardingSize 4`,
        ...timeline,
      ].join('\n'),
    );
  }, 240_000);
});
