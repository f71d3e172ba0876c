import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiextensionsV1Api, CoordinationV1Api, CoreV1Api, CustomObjectsApi, EventsV1Api, KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentHandle } from '../../src/agent/index.js';
import { freePort, parseKubeVersion, resolveTool, startApiServer, writeKubeconfig, type ApiServerHandle } from '../../src/dev/index.js';
import { HUB_DEFAULTS, type HubHandle, type OperatorStatus } from '../../src/hub/index.js';
import { shardLockName } from '../../src/proxy/index.js';
import { bucketOf } from '../../src/sharding/index.js';
import { GROUP, apply, bootstrapTokens, eventually, logger, privateNats, proxyNatsConfig, routeSignerKey, runAgent, runHub } from './control-fixture.js';
import { startOperator, widgetCrd, WIDGET_FINALIZER, WIDGETS, type ObservedDelete, type OperatorProcess, type Reconciled } from './helpers/conformance-operator.js';
import { eachLine, startShardProxy } from './helpers/e2e-shard.js';
import { publishedOwners } from './helpers/handover-timeline.js';
import { silent, type TestProxy } from './helpers/proxy.js';
import { kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

const PROXY_LEASE_SECONDS = 5;
const HASH = { algorithm: 'fnv-range', bucketCount: 32 } as const;
const NAMESPACES = 6;
// The operator's own default lock name: a ShardingConfig names the lock its operator already uses.
const LEADER = 'conformance-operator-leader';
const PREFIX = 'cr';

interface Widget extends KubernetesObject {
  status?: { reconciledBy?: string; observedGeneration?: number };
}

/** One shard as a pod runs it: a proxy following its table over NATS, and two replicas of the operator behind it. */
interface Shard {
  name: string;
  port: number;
  dir: string;
  proxy: TestProxy;
  replicas: OperatorProcess[];
}

/**
 * An operator built on controller-runtime, left at its defaults (leader election on, protobuf for built-in kinds,
 * WatchList where client-go uses it), sharded in two behind NATS-fed proxies: tools/controller-runtime's conformance
 * operator, a kubebuilder-style reconciler with a CRD, finalizers, status, events and owned objects. Judged by
 * effect: the Leases on the API server, who wrote each Widget's status, and the deletes the operator's informers
 * delivered while the mesh was disturbed.
 */
describe('a controller-runtime operator at its defaults, sharded: leader election, one owner per object, caches that survive faults', () => {
  const kubeVersion = parseKubeVersion(testbed().kubeVersion, 'the test bed');
  const opNamespace = uniqueName('cr-op');
  const namespaces = Array.from({ length: NAMESPACES }, (_, i) => namespaceIn(`cr-w${i}`, (i * 32) / NAMESPACES, ((i + 1) * 32) / NAMESPACES));
  const operator = `${opNamespace}/${PREFIX}-root`;
  const reconciles: Reconciled[] = [];
  const deletes: ObservedDelete[] = [];
  const shards: Shard[] = [];
  const figures: Record<string, unknown> = {};
  let server: ApiServerHandle;
  let clusterName: string;
  let dir: string;
  let binary: string;
  let nats: Awaited<ReturnType<typeof privateNats>>;
  let hub: HubHandle;
  let agent: AgentHandle;
  let core: CoreV1Api;
  let custom: CustomObjectsApi;

  const shardName = (i: number): string => `${clusterName}/${PREFIX}-${i}-normal`;
  const status = (): OperatorStatus => {
    const found = hub.status().operators.find((o) => o.operator === operator);
    if (!found) throw new Error(`the hub has no route tables for ${operator} yet`);
    return found;
  };
  const unitOf = (namespace: string): string => `${bucketOf(namespace, HASH)}@${clusterName}`;
  const publishedOwnerOf = (namespace: string): string | undefined => publishedOwners(status()).get(unitOf(namespace));
  const owners = async (): Promise<Map<string, string>> =>
    eventually(() => {
      const s = status();
      expect(s.pending).toEqual([]);
      const found = publishedOwners(s);
      expect(found.size).toBe(32);
      expect(new Set(found.values()).size).toBe(2);
      return found;
    }, 60_000);
  const leaderOf = (shard: Shard): OperatorProcess[] => shard.replicas.filter((r) => r.electedMs !== undefined);
  const widget = (ns: string, name: string): Promise<Widget> => custom.getNamespacedCustomObject({ ...WIDGETS, namespace: ns, name }) as Promise<Widget>;
  const createWidget = (ns: string, name: string): Promise<unknown> =>
    custom.createNamespacedCustomObject({ ...WIDGETS, namespace: ns, body: { apiVersion: `${WIDGETS.group}/${WIDGETS.version}`, kind: 'Widget', metadata: { name }, spec: { size: 1 } } });

  const startShard = async (i: number): Promise<Shard> => {
    const name = shardName(i);
    const shardDir = join(dir, `shard-${i}`);
    const port = await freePort();
    const proxy = await startShardProxy({ nats: nats.nats, operator, shard: name, clusters: [clusterName], dir: shardDir, credentialsPath: await credentials(i), apiPort: port });
    const replicas = ['a', 'b'].map((r) =>
      startOperator({ binary, kubeconfig: proxy.kubeconfigPath, identity: `${PREFIX}-${i}-${r}`, leaderNamespace: opNamespace, reconciles, deletes }),
    );
    return { name, port, dir: shardDir, proxy, replicas };
  };
  const credentials = async (i: number): Promise<string> => {
    const path = join(dir, `credentials-${i}`);
    const identity = await server.issueClientCertificate(`ctrlmesh-proxy-${PREFIX}-${i}`, ['system:masters']);
    await writeKubeconfig(path, [{ ...server, clientCertPem: identity.certPem, clientKeyPem: identity.keyPem }]);
    return path;
  };

  /** Every Widget reconciled, since `since`, by the elected replica of its bucket's owner, and stamped by it alone. */
  const reconciledByOwners = async (names: string[], since: number): Promise<void> => {
    const ownership = await owners();
    await eventually(
      async () => {
        for (const ns of namespaces) {
          const shard = shards.find((s) => s.name === ownership.get(unitOf(ns)))!;
          const leaders = leaderOf(shard).map((r) => r.identity);
          expect(leaders).toHaveLength(1);
          for (const name of names) {
            expect(reconciles.some((r) => r.key === `${ns}/${name}` && r.at >= since && leaders.includes(r.identity)), `${ns}/${name} by ${leaders[0]}`).toBe(true);
            expect((await widget(ns, name)).status?.reconciledBy).toBe(leaders[0]);
          }
        }
      },
      90_000,
      500,
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}\noperator logs:\n${shards.flatMap((s) => s.replicas.map((r) => `${r.identity}:\n${r.log.slice(-15).join('\n')}`)).join('\n')}`);
    });
  };

  /** Deletes the informers delivered since `since` for objects that still exist: each one an operator acting on a lie. */
  const spuriousDeletes = async (since: number): Promise<ObservedDelete[]> => {
    const spurious: ObservedDelete[] = [];
    for (const d of deletes.filter((x) => x.at >= since)) {
      const exists =
        d.kind === 'Widget'
          ? await widget(d.namespace, d.name).then(() => true, () => false)
          : await core.readNamespacedConfigMap({ namespace: d.namespace, name: d.name }).then(() => true, () => false);
      if (exists) spurious.push(d);
    }
    return spurious;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-real-operator-'));
    binary = (await resolveTool('conformance-operator', { onProgress: (m) => console.log(m) })).path;
    server = await startApiServer({ etcd: testbed().etcd, name: uniqueName('cr'), dir: join(dir, 'server'), logger: silent, kubeVersion });
    clusterName = server.name;
    const kc = kubeConfigFor(server);
    core = kc.makeApiClient(CoreV1Api);
    custom = kc.makeApiClient(CustomObjectsApi);
    await KubernetesObjectApi.makeApiClient(kc).create(widgetCrd());
    await eventually(() => custom.listClusterCustomObject(WIDGETS), 30_000, 250);
    for (const ns of [opNamespace, ...namespaces]) await core.createNamespace({ body: { metadata: { name: ns } } });
    for (const ns of namespaces) for (const name of ['w1', 'w2']) await createWidget(ns, name);

    nats = await privateNats();
    hub = await runHub(nats.nats, 'cr-hub', { tokens: bootstrapTokens(clusterName), debounceMs: HUB_DEFAULTS.debounceMs, health: HUB_DEFAULTS.health, proxyLeaseSeconds: PROXY_LEASE_SECONDS });
    await eventually(() => expect(hub.isLeader()).toBe(true));
    agent = await runAgent({ registryName: clusterName, bed: server, nats: nats.nats, webhook: undefined, hash: { algorithm: HASH.algorithm, bucketCount: HASH.bucketCount } });
    await apply(kc, {
      apiVersion: `${GROUP}/v1alpha1`,
      kind: 'ShardingConfig',
      metadata: { name: `${PREFIX}-root`, namespace: opNamespace },
      spec: {
        root: {
          prefix: PREFIX,
          targetStatefulSet: 'conformance-operator',
          auto: { shardingSize: 2, everyShardReplicas: 2 },
          resourceSelector: [
            { apiGroups: [WIDGETS.group], resources: [WIDGETS.plural] },
            { apiGroups: [''], resources: ['configmaps'] },
          ],
        },
        controller: { leaderElectionName: LEADER },
        selector: { matchLabels: { app: 'conformance-operator' } },
      },
    });
    await owners();
    for (const i of [1, 2]) shards.push(await startShard(i));
  }, 600_000);

  afterAll(async () => {
    for (const shard of shards) {
      for (const r of shard.replicas) await r.stop().catch(() => undefined);
      await shard.proxy.close().catch(() => undefined);
    }
    await agent?.stop();
    await hub?.stop();
    await nats?.cleanup();
    console.log(`real-operator figures (kube ${kubeVersion.version}): ${JSON.stringify(figures)}`);
    if (server) {
      for (const ns of [opNamespace, ...namespaces]) await core.deleteNamespace({ name: ns }).catch(() => undefined);
      await kubeConfigFor(server).makeApiClient(ApiextensionsV1Api).deleteCustomResourceDefinition({ name: `${WIDGETS.plural}.${WIDGETS.group}` }).catch(() => undefined);
      await server.stop();
    }
    await rm(dir, { recursive: true, force: true });
  });

  it('each shard elects exactly one leader through its proxy, on a Lease of its own with a valid name', async () => {
    const leases = kubeConfigFor(server).makeApiClient(CoordinationV1Api);
    await eventually(
      async () => {
        for (const shard of shards) {
          expect(leaderOf(shard).map((r) => r.identity), shard.name).toHaveLength(1);
          const lease = await leases.readNamespacedLease({ namespace: opNamespace, name: shardLockName(LEADER, shard.name) });
          expect(lease.spec?.holderIdentity).toBeTruthy();
        }
      },
      60_000,
      250,
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}\n${shards.flatMap((s) => s.replicas.map((r) => `${r.identity}:\n${r.log.slice(-10).join('\n')}`)).join('\n')}`);
    });
    const names = (await leases.listNamespacedLease({ namespace: opNamespace })).items.map((l) => l.metadata?.name).sort();
    expect(names).toEqual(shards.map((s) => shardLockName(LEADER, s.name)).sort());
    figures.timeToLeaderMs = Object.fromEntries(shards.map((s) => [s.name, leaderOf(s)[0]?.electedMs]));
    // From 1.36 on, the bed's API server selects each shard's objects itself (shard selectors); labels before.
    const serverShards = Number(/^v1\.(\d+)\./u.exec(kubeVersion.version)?.[1]) >= 36;
    for (const shard of shards) expect(shard.proxy.proxy.controller.current?.table.clusters[0]?.selection).toBe(serverShards ? 'shardSelector' : undefined);
    // No shard lists or watches a renamed lock, its own or another's, whoever owns the operator namespace's bucket
    // (on 1.37 the API server's shard selector would let that shard's lists show them all).
    for (const shard of shards) {
      const leasesUrl = `${shard.proxy.proxy.apiUrl}/apis/coordination.k8s.io/v1/namespaces/${opNamespace}/leases`;
      const listed = (await (await fetch(leasesUrl)).json()) as { items?: { metadata?: { name?: string } }[] };
      expect(listed.items?.map((l) => l.metadata?.name) ?? [], shard.name).toEqual([]);
      const watched = await (await fetch(`${leasesUrl}?watch=true&timeoutSeconds=1`)).text();
      expect(watched, shard.name).not.toContain(LEADER);
    }
    // The other replica of each shard stays a candidate: still running, never elected.
    for (const shard of shards) expect(shard.replicas.every((r) => r.process.exitCode === null)).toBe(true);
  }, 120_000);

  it('every Widget is reconciled by its bucket\'s owner alone: finalizer, owned ConfigMap, status and event', async () => {
    await reconciledByOwners(['w1', 'w2'], 0);
    const events = kubeConfigFor(server).makeApiClient(EventsV1Api);
    for (const ns of namespaces) {
      const w = await widget(ns, 'w1');
      expect(w.metadata?.finalizers).toContain(WIDGET_FINALIZER);
      const child = await core.readNamespacedConfigMap({ namespace: ns, name: 'w1-owned' });
      expect(child.metadata?.ownerReferences?.map((o) => [o.uid, o.controller])).toEqual([[w.metadata?.uid, true]]);
      expect(child.data?.reconciledBy).toBe(w.status?.reconciledBy);
      const listed = await events.listNamespacedEvent({ namespace: ns });
      expect(listed.items.some((e) => e.regarding?.name === 'w1' && e.reason === 'Reconciled')).toBe(true);
      // No replica of another shard ever reconciled it.
      const owner = (await owners()).get(unitOf(ns));
      const ownerReplicas = shards.find((s) => s.name === owner)!.replicas.map((r) => r.identity);
      expect(new Set(reconciles.filter((r) => r.key.startsWith(`${ns}/`)).map((r) => r.identity)).size).toBe(1);
      expect(ownerReplicas).toContain(reconciles.find((r) => r.key === `${ns}/w1`)?.identity);
    }
  }, 150_000);

  /** Disturbs the mesh, then checks that the operators go on and that their informers delivered no delete of a live object. */
  const survives = async (fault: string, disturb: () => Promise<void>): Promise<void> => {
    const since = Date.now();
    await disturb();
    const name = `after-${fault}`;
    for (const ns of namespaces) await createWidget(ns, name);
    await reconciledByOwners([name], since);
    const spurious = await spuriousDeletes(since);
    (figures.spuriousDeletes ??= {} as Record<string, number>);
    (figures.spuriousDeletes as Record<string, number>)[fault] = spurious.length;
    expect(spurious.map((d) => `${d.identity} saw ${d.kind} ${d.namespace}/${d.name} deleted`)).toEqual([]);
  };
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

  it('a hub restarted within the lease, and a hub away for longer than the lease: no delete of a live object', async () => {
    await survives('hub-restart', async () => {
      await hub.stop();
      await sleep(1_000);
      hub = await runHub(nats.nats, 'cr-hub', { tokens: bootstrapTokens(clusterName), debounceMs: HUB_DEFAULTS.debounceMs, health: HUB_DEFAULTS.health, proxyLeaseSeconds: PROXY_LEASE_SECONDS });
    });
    await survives('hub-outage', async () => {
      await hub.stop();
      // Every proxy fences (its lease runs out) and answers 503 until a hub extends it again.
      await eventually(() => expect(shards.every((s) => s.proxy.proxy.controller.current?.fenced === true)).toBe(true), 30_000, 100);
      await sleep(3_000);
      hub = await runHub(nats.nats, 'cr-hub', { tokens: bootstrapTokens(clusterName), debounceMs: HUB_DEFAULTS.debounceMs, health: HUB_DEFAULTS.health, proxyLeaseSeconds: PROXY_LEASE_SECONDS });
    });
  }, 300_000);

  it('NATS away for longer than the lease: no delete of a live object', async () => {
    await survives('nats-outage', async () => {
      await nats.nats.stop();
      await eventually(() => expect(shards.every((s) => s.proxy.proxy.controller.current?.fenced === true)).toBe(true), 30_000, 100);
      await sleep(2_000);
      await nats.nats.start();
    });
  }, 300_000);

  it('a proxy restarted under its operator: no delete of a live object', async () => {
    await survives('proxy-restart', async () => {
      const shard = shards[0]!;
      const layout = shard.proxy.proxy.controller.current?.table;
      await shard.proxy.close();
      await sleep(1_000);
      // The same port and store, as a restarted sidecar: it serves its stored table only once a hub extends its lease.
      shard.proxy = await startShardProxy({ nats: nats.nats, operator, shard: shard.name, clusters: [clusterName], dir: shard.dir, credentialsPath: join(dir, 'credentials-1'), apiPort: shard.port, ...(layout ? { layout } : {}) });
    });
    logger.info({ figures }, 'real operator');
  }, 300_000);

  it('ctrlmesh run starts one shard with one command: its proxy, the operator once served, both stopped together', async () => {
    const shard = shards[0]!;
    const natsConfig = await proxyNatsConfig(nats.nats, operator, shard.name);
    const kubeconfig = join(dir, 'run', 'kubeconfig');
    const run = spawn(
      process.execPath,
      [
        join('dist', 'src', 'cli', 'main.js'), 'run',
        '--nats', nats.nats.url, '--nats-ca', natsConfig.tls?.caFile ?? '', '--nats-creds', natsConfig.credentials?.kind === 'creds' ? natsConfig.credentials.file : '',
        '--route-signer', routeSignerKey(nats.nats), '--operator', operator, '--shard', shard.name,
        '--credentials', join(dir, 'credentials-1'), '--write-kubeconfig', kubeconfig, '--store', join(dir, 'run', 'table.json'), '--log-level', 'error',
        '--', binary, '--identity=cr-1-run', `--leader-election-namespace=${opNamespace}`, '--health-probe-bind-address=0',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    const lines: string[] = [];
    eachLine(run.stderr, (line) => lines.push(line));
    const exited = new Promise<number | null>((resolve) => run.once('exit', (code) => resolve(code)));
    try {
      await eventually(() => expect(lines.some((l) => l.includes('"msg":"starting manager"') && l.includes('cr-1-run'))).toBe(true), 60_000, 100);
      expect(lines.some((l) => l.startsWith(`shard ${shard.name} served; starting`))).toBe(true);
      // The kubeconfig names the port the proxy listens on (it was asked for any port).
      expect(await readFile(kubeconfig, 'utf8')).toMatch(/"server": "http:\/\/127\.0\.0\.1:[1-9][0-9]*"/u);
      // The shard's other replicas gone, the one ctrlmesh run started takes the shard's lock and reconciles.
      for (const r of shard.replicas) await r.stop();
      const ns = namespaces.find((n) => publishedOwnerOf(n) === shard.name)!;
      await createWidget(ns, 'by-run');
      await eventually(async () => expect((await widget(ns, 'by-run')).status?.reconciledBy).toBe('cr-1-run'), 60_000, 250);
    } finally {
      run.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    expect(lines.some((l) => l.includes('exited with code 0; stopping the proxy'))).toBe(true);
    // Its operator went with it: no process of that identity is left.
    expect(spawnSync('pgrep', ['-f', 'identity=cr-1-run']).status).toBe(1);
    shard.replicas = ['a', 'b'].map((r) => startOperator({ binary, kubeconfig: shard.proxy.kubeconfigPath, identity: `${PREFIX}-1-${r}`, leaderNamespace: opNamespace, reconciles, deletes }));
  }, 180_000);

  it('cache sync through the proxy against direct, the same binary, interleaved', async () => {
    const direct = join(dir, 'direct-kubeconfig');
    await writeKubeconfig(direct, [server]);
    const rounds: Record<'direct' | 'proxy', number[]> = { direct: [], proxy: [] };
    for (let round = 0; round < 3; round++) {
      for (const path of round % 2 === 0 ? (['direct', 'proxy'] as const) : (['proxy', 'direct'] as const)) {
        // Leader election off: it measures the lists and watches alone (reconciles go to a log of their own).
        const measured = startOperator({ binary, kubeconfig: path === 'direct' ? direct : shards[0]!.proxy.kubeconfigPath, identity: `sync-${path}-${round}`, leaderNamespace: opNamespace, reconciles: [], deletes: [], args: ['--leader-elect=false'] });
        const synced = await eventually(() => {
          expect(measured.syncedMs).toBeDefined();
          return measured.syncedMs as number;
        }, 30_000, 20);
        await measured.stop();
        rounds[path].push(synced);
      }
    }
    const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    figures.cacheSyncMs = { direct: rounds.direct, proxy: rounds.proxy, medianDirect: median(rounds.direct), medianProxy: median(rounds.proxy) };
    expect(rounds.proxy).toHaveLength(3);
  }, 180_000);
});

/** A unique namespace name whose bucket is in [lo, hi): spreads the workload over both shards. */
function namespaceIn(prefix: string, lo: number, hi: number): string {
  for (;;) {
    const name = uniqueName(prefix);
    const b = bucketOf(name, HASH);
    if (b >= lo && b < hi) return name;
  }
}
