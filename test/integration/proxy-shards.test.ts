import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { ApiException, CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RECONCILED_BY } from '../../src/sample-operator/reconciler.js';
import { plan } from '../../src/sharding/index.js';
import { HASH_LABEL, bucket, clusterRoute, routeTable, settles, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { cluster, kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

const OPERATOR = 'operator-demo/demo';
const SHARDS = ['shard-0', 'shard-1', 'shard-2'];

describe('the sample operator as 3 shards through 3 proxies over 2 clusters', () => {
  const clusters = [cluster(0), cluster(1)];
  const admins = clusters.map((c) => kubeConfigFor(c).makeApiClient(CoreV1Api));
  const namespaces = Array.from({ length: 8 }, (_, i) => uniqueName(`demo-${i}`));
  // The planner's static assignment: every shard may own units of both clusters (multicluster operator).
  const assignment = plan({
    hash: { algorithm: 'kusionstack', bucketCount: 32 },
    clusters: clusters.map((c) => ({ name: c.name })),
    weights: [],
    operators: [{ name: OPERATOR, multicluster: true, shards: SHARDS.map((name, i) => ({ name, homeCluster: clusters[i === 2 ? 1 : 0]!.name })) }],
  }).assignment.operators[OPERATOR]!;
  const ownerOf = (clusterName: string, b: number): string => SHARDS.find((s) => assignment[s]?.[clusterName]?.includes(b))!;
  const harnesses: TestProxy[] = [];
  const operators: ChildProcess[] = [];
  const reconciled: { shard: string; key: string; cluster: string }[] = [];

  beforeAll(async () => {
    for (const [ci, admin] of admins.entries()) {
      for (const ns of namespaces) {
        const labels = { [HASH_LABEL]: String(bucket(ns)) };
        await admin.createNamespace({ body: { metadata: { name: ns, labels } } });
        for (const name of ['one', 'two']) {
          await admin.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name, labels: { ...labels, app: 'demo' } }, data: { cluster: String(ci) } } });
        }
      }
    }
    for (const [i, shard] of SHARDS.entries()) {
      const routes = clusters.map((c) => {
        const owners = Object.fromEntries(Array.from({ length: 32 }, (_, b) => [String(b), ownerOf(c.name, b)]).filter(([, s]) => s !== shard && s !== undefined));
        return clusterRoute(c, assignment[shard]?.[c.name] ?? [], { bucketOwners: owners });
      });
      const harness = await startTestProxy({ table: routeTable({ shard, homeCluster: clusters[i === 2 ? 1 : 0]!.name, clusters: routes }), credentialsPath: testbed().kubeconfigPath });
      harnesses.push(harness);
      const child = spawn(
        process.execPath,
        [join('dist', 'src', 'sample-operator', 'main.js'), '--kubeconfig', harness.kubeconfigPath, '--shard', shard, '--contexts', clusters.map((c) => c.name).join(',')],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      );
      operators.push(child);
      let pending = '';
      child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
        pending += chunk;
        let nl: number;
        while ((nl = pending.indexOf('\n')) >= 0) {
          const match = /^reconciled (\S+) shard=(\S+) cluster=(\S+)$/.exec(pending.slice(0, nl));
          if (match) reconciled.push({ key: match[1]!, shard: match[2]!, cluster: match[3]! });
          pending = pending.slice(nl + 1);
        }
      });
    }
  }, 120_000);

  afterAll(async () => {
    // Operators first, so their watches do not see the proxies go away.
    await Promise.all(
      operators.map((child) => {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        return child.exitCode === null ? exited : undefined;
      }),
    );
    for (const harness of harnesses) await harness.close();
    for (const admin of admins) for (const ns of namespaces) await admin.deleteNamespace({ name: ns }).catch(() => undefined);
  });

  it('reconciles every object by exactly one shard, the owner of its unit', async () => {
    await settles(async () => {
      for (const admin of admins) {
        for (const ns of namespaces) {
          const list = await admin.listNamespacedConfigMap({ namespace: ns, labelSelector: 'app=demo' });
          expect(list.items.every((cm) => cm.metadata?.annotations?.[RECONCILED_BY] !== undefined)).toBe(true);
        }
      }
    }, 45_000);
    for (const [ci, c] of clusters.entries()) {
      for (const ns of namespaces) {
        const owner = ownerOf(c.name, bucket(ns));
        for (const name of ['one', 'two']) {
          const by = new Set(reconciled.filter((r) => r.cluster === c.name && r.key === `${ns}/${name}`).map((r) => r.shard));
          expect([...by]).toEqual([owner]);
          const stored = await admins[ci]!.readNamespacedConfigMap({ name, namespace: ns });
          expect(stored.metadata?.annotations?.[RECONCILED_BY]).toBe(owner);
        }
      }
    }
    expect(new Set(reconciled.map((r) => r.shard)).size).toBeGreaterThan(1);
  });

  it("keeps another shard's objects out of a shard's lists and refuses its writes to them", async () => {
    for (const [i, shard] of SHARDS.entries()) {
      for (const c of clusters) {
        const core = harnesses[i]!.kubeConfig(c.name).makeApiClient(CoreV1Api);
        const list = await core.listConfigMapForAllNamespaces({ labelSelector: 'app=demo' });
        // Ownership is by the object's hash label (what the agent stamps), the test's objects and any others alike.
        expect(list.items.every((cm) => ownerOf(c.name, Number(cm.metadata?.labels?.[HASH_LABEL])) === shard)).toBe(true);
        const ours = list.items.filter((cm) => namespaces.includes(cm.metadata!.namespace!));
        expect(ours.length).toBe(2 * namespaces.filter((ns) => ownerOf(c.name, bucket(ns)) === shard).length);
        const foreign = namespaces.find((ns) => ownerOf(c.name, bucket(ns)) !== shard);
        if (foreign === undefined) continue;
        const owner = ownerOf(c.name, bucket(foreign));
        const refused = await core
          .patchNamespacedConfigMap({ name: 'one', namespace: foreign, body: [{ op: 'add', path: '/data/stolen', value: 'yes' }] })
          .then(() => undefined, (err: unknown) => err as ApiException<string>);
        expect(refused?.code).toBe(403);
        expect(refused?.body).toContain(`shard \\"${owner}\\"`);
      }
    }
  });
});
