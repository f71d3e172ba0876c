import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, ApiextensionsV1Api, CoreV1Api, CustomObjectsApi, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HASH_LABEL, bucket, clusterRoute, leastPrivilegeKubeconfig, namespaceOutside, refusedBy, routeTable, settles, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { rawRequest, type RawResponse } from './helpers/raw-http.js';
import { cluster, kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

const GROUP = 'boundary.example.io';
const WIDGETS = `/apis/${GROUP}/v1/clusterwidgets`;
const MESH_SECRET = 'ctrlmesh-proxy';
const JSON_TYPE = { 'content-type': 'application/json' };

/**
 * The shard owns the bucket of the operator's own namespace (where every shard's credentials live) and one more; a
 * victim namespace and a cluster-scoped custom object labelled with the victim's bucket are another shard's. Every
 * way out is tried through two proxies, one with an admin identity and one with an operator-like least-privilege
 * ServiceAccount, and judged by effect: the marker never in an answer, and the admin finds nothing created, changed
 * or deleted. Each refusal is the proxy's own, whichever identity: none of these results depends on RBAC.
 */
describe('the proxy keeps mesh credentials, cluster-scoped kinds and other buckets out of a shard\'s reach', () => {
  const a = cluster(0);
  const kc = kubeConfigFor(a);
  const admin = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const operatorNs = uniqueName('bnd-op');
  const ownedNs = namespaceOutside('bnd-own', new Set());
  const owned = new Set([bucket(operatorNs), bucket(ownedNs)]);
  const victimNs = namespaceOutside('bnd-victim', owned);
  const marker = `leak-${Math.random().toString(36).slice(2, 10)}`;
  const markerB64 = Buffer.from(marker).toString('base64');
  const planted = `bnd-${Math.random().toString(36).slice(2, 8)}`;
  const proxies = new Map<'admin' | 'least-privilege', TestProxy>();
  let filtering: TestProxy;
  let dir: string;
  let removeIdentity: (() => Promise<void>) | undefined;
  const refusals: Record<string, Record<string, string>> = {};

  const leaked = (res: RawResponse): boolean => res.text.includes(marker) || res.text.includes(markerB64);
  const labels = (ns: string): Record<string, string> => ({ [HASH_LABEL]: String(bucket(ns)) });

  /** Sends one request through both proxies; records who refused it. */
  async function both(what: string, method: string, target: string, body?: unknown, contentType = 'application/json'): Promise<RawResponse[]> {
    const out: RawResponse[] = [];
    for (const [identity, harness] of proxies) {
      const res = await rawRequest(harness.proxy.apiUrl, { method, target, readMs: 3000, ...(body === undefined ? {} : { headers: { 'content-type': contentType }, body: JSON.stringify(body) }) });
      (refusals[what] ??= {})[identity] = `${res.status} ${refusedBy(res)}`;
      out.push(res);
    }
    return out;
  }

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-boundary-'));
    for (const ns of [operatorNs, ownedNs, victimNs]) await admin.createNamespace({ body: { metadata: { name: ns, labels: labels(ns) } } });
    // The mesh's credentials as the agent writes them: the operator's Secret and one per shard.
    for (const name of [MESH_SECRET, `${MESH_SECRET}.${a.name}.demo-2-normal`]) {
      await admin.createNamespacedSecret({ namespace: operatorNs, body: { metadata: { name, labels: labels(operatorNs) }, stringData: { kubeconfig: marker } } });
    }
    await admin.createNamespacedServiceAccount({ namespace: operatorNs, body: { metadata: { name: MESH_SECRET } } });
    await admin.createNamespacedSecret({ namespace: victimNs, body: { metadata: { name: 'victim', labels: labels(victimNs) }, stringData: { v: marker } } });
    // A page of ConfigMaps whose last key is the victim's: the API server's continue token would name it.
    for (const ns of [ownedNs, victimNs]) {
      for (const name of ['cm-1', 'cm-2', 'cm-3']) await admin.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name, labels: labels(ns) }, data: { v: 'x' } } });
    }

    await kc.makeApiClient(ApiextensionsV1Api).createCustomResourceDefinition({
      body: {
        metadata: { name: `clusterwidgets.${GROUP}` },
        spec: {
          group: GROUP,
          scope: 'Cluster',
          names: { plural: 'clusterwidgets', singular: 'clusterwidget', kind: 'ClusterWidget' },
          versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true } } }],
        },
      },
    });
    await settles(async () => {
      await custom.createClusterCustomObject({ group: GROUP, version: 'v1', plural: 'clusterwidgets', body: { apiVersion: `${GROUP}/v1`, kind: 'ClusterWidget', metadata: { name: `${planted}-theirs`, labels: labels(victimNs) }, spec: { v: marker } } });
    }, 30_000);
    await custom.createClusterCustomObject({ group: GROUP, version: 'v1', plural: 'clusterwidgets', body: { apiVersion: `${GROUP}/v1`, kind: 'ClusterWidget', metadata: { name: `${planted}-mine`, labels: labels(ownedNs) }, spec: { v: 'mine' } } });

    // An operator-like identity, and its rights on the custom kind.
    removeIdentity = await leastPrivilegeKubeconfig({
      kc,
      cluster: a,
      namespace: ownedNs,
      name: 'operator',
      path: join(dir, 'least-privilege'),
      rules: [{ apiGroups: [GROUP], resources: ['clusterwidgets'], verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'] }],
    });
    const leastPrivilege = join(dir, 'least-privilege');

    const table = routeTable({ shard: 'demo-1-normal', operator: `${operatorNs}/demo`, homeCluster: a.name, clusters: [clusterRoute(a, [...owned])] });
    proxies.set('admin', await startTestProxy({ table, credentialsPath: testbed().kubeconfigPath, dir: join(dir, 'admin') }));
    proxies.set('least-privilege', await startTestProxy({ table, credentialsPath: leastPrivilege, dir: join(dir, 'lp') }));
    const unlabelled = routeTable({ shard: 'demo-1-normal', operator: `${operatorNs}/demo`, homeCluster: a.name, clusters: [clusterRoute(a, [...owned], { selection: 'proxyFilter' })] });
    filtering = await startTestProxy({ table: unlabelled, credentialsPath: testbed().kubeconfigPath, dir: join(dir, 'filtering') });
  }, 120_000);

  afterAll(async () => {
    process.stderr.write(`refused by, per identity: ${JSON.stringify(refusals)}\n`);
    for (const harness of [...proxies.values(), filtering]) await harness?.close();
    await removeIdentity?.();
    await kc.makeApiClient(ApiextensionsV1Api).deleteCustomResourceDefinition({ name: `clusterwidgets.${GROUP}` }).catch(() => undefined);
    for (const ns of [operatorNs, ownedNs, victimNs]) await admin.deleteNamespace({ name: ns }).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  it('no shard reads, watches or writes the mesh\'s credentials, mints a token, or reaches into the pods that mount them', async () => {
    const ns = `/api/v1/namespaces/${operatorNs}`;
    const reads = [
      ...(await both('get the mesh Secret', 'GET', `${ns}/secrets/${MESH_SECRET}`)),
      ...(await both('get another shard\'s Secret', 'GET', `${ns}/secrets/${MESH_SECRET}.${a.name}.demo-2-normal`)),
      ...(await both('list the operator namespace\'s Secrets', 'GET', `${ns}/secrets`)),
      ...(await both('list every Secret', 'GET', '/api/v1/secrets')),
      ...(await both('watch the operator namespace\'s Secrets', 'GET', `${ns}/secrets?watch=true&timeoutSeconds=1`)),
    ];
    for (const res of reads) expect(leaked(res)).toBe(false);
    const writes = [
      ...(await both('replace the mesh Secret', 'PUT', `${ns}/secrets/${MESH_SECRET}`, { metadata: { name: MESH_SECRET }, stringData: { kubeconfig: 'mine' } })),
      ...(await both('delete the mesh Secret', 'DELETE', `${ns}/secrets/${MESH_SECRET}`)),
      ...(await both('delete the operator namespace\'s Secrets', 'DELETE', `${ns}/secrets`)),
      ...(await both('mint a token for the proxy\'s ServiceAccount', 'POST', `${ns}/serviceaccounts/${MESH_SECRET}/token`, { spec: { audiences: [] } })),
      ...(await both('mint a token in an owned namespace', 'POST', `/api/v1/namespaces/${ownedNs}/serviceaccounts/operator/token`, { spec: { audiences: [] } })),
      ...(await both('a token Secret in an owned namespace', 'POST', `/api/v1/namespaces/${ownedNs}/secrets`, { metadata: { name: `${planted}-token`, annotations: { 'kubernetes.io/service-account.name': 'operator' } }, type: 'kubernetes.io/service-account-token' })),
      ...(await both('a pod mounting the mesh Secret', 'POST', `${ns}/pods`, { metadata: { name: `${planted}-pod` }, spec: { containers: [{ name: 'c', image: 'busybox' }], volumes: [{ name: 's', secret: { secretName: MESH_SECRET } }] } })),
      ...(await both('exec into a pod of the operator\'s namespace', 'POST', `${ns}/pods/demo-0/exec?command=cat`)),
    ];
    for (const res of writes) {
      expect(res.status).toBe(403);
      expect(refusedBy(res)).toBe('proxy');
      expect(leaked(res)).toBe(false);
    }
    // By effect: the Secrets as they were, no token Secret, no pod.
    const secrets = await admin.listNamespacedSecret({ namespace: operatorNs });
    expect(secrets.items.filter((s) => s.metadata?.name?.startsWith(MESH_SECRET)).map((s) => Buffer.from(s.data?.kubeconfig ?? '', 'base64').toString())).toEqual([marker, marker]);
    expect((await admin.listNamespacedSecret({ namespace: ownedNs })).items.map((s) => s.metadata?.name)).not.toContain(`${planted}-token`);
    expect((await admin.listNamespacedPod({ namespace: operatorNs })).items).toEqual([]);
    // The rest of the operator's namespace is the bucket's: an ordinary Secret there is the shard's.
    for (const harness of proxies.values()) {
      const res = await rawRequest(harness.proxy.apiUrl, { method: 'POST', target: `${ns}/secrets`, headers: JSON_TYPE, body: JSON.stringify({ metadata: { generateName: 'webhook-cert-' }, stringData: { v: 'x' } }) });
      expect(res.status).toBe(201);
    }
  });

  it('no cluster-scoped write that grants access lands: webhooks, RBAC, nodes, volumes', async () => {
    const writes = [
      ...(await both('a mutating webhook', 'POST', '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', {
        metadata: { name: planted },
        webhooks: [{ name: `${planted}.example.io`, admissionReviewVersions: ['v1'], sideEffects: 'None', clientConfig: { url: 'https://127.0.0.1:1/steal' }, rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['secrets'] }], failurePolicy: 'Ignore' }],
      })),
      ...(await both('a ClusterRoleBinding', 'POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
        metadata: { name: planted },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
        subjects: [{ kind: 'ServiceAccount', name: 'operator', namespace: ownedNs }],
      })),
      ...(await both('a Node', 'POST', '/api/v1/nodes', { metadata: { name: planted } })),
      ...(await both('a hostPath volume bound to the victim\'s claim', 'POST', '/api/v1/persistentvolumes', {
        metadata: { name: planted },
        spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteOnce'], hostPath: { path: '/' }, claimRef: { namespace: victimNs, name: 'data' } },
      })),
    ];
    for (const res of writes) {
      expect(res.status).toBe(403);
      expect(refusedBy(res)).toBe('proxy');
    }
    const codeOf = (call: Promise<unknown>): Promise<number> => call.then(() => 200, (err: { code?: number }) => err.code ?? 0);
    expect(await codeOf(kc.makeApiClient(AdmissionregistrationV1Api).readMutatingWebhookConfiguration({ name: planted }))).toBe(404);
    expect(await codeOf(kc.makeApiClient(RbacAuthorizationV1Api).readClusterRoleBinding({ name: planted }))).toBe(404);
    expect(await codeOf(admin.readNode({ name: planted }))).toBe(404);
    expect(await codeOf(admin.readPersistentVolume({ name: planted }))).toBe(404);
    // Reading built-in cluster-scoped kinds is every shard's.
    for (const harness of proxies.values()) expect((await rawRequest(harness.proxy.apiUrl, { method: 'GET', target: '/api/v1/nodes' })).status).toBe(200);
  });

  it('a cluster-scoped custom object of another bucket is neither read nor written, as its list hides it', async () => {
    const theirs = `${WIDGETS}/${planted}-theirs`;
    const before = (await custom.getClusterCustomObject({ group: GROUP, version: 'v1', plural: 'clusterwidgets', name: `${planted}-theirs` })) as { metadata: { resourceVersion: string } };
    const reads = [...(await both('get another bucket\'s cluster-scoped object', 'GET', theirs)), ...(await both('list cluster-scoped objects', 'GET', WIDGETS))];
    for (const res of reads) expect(leaked(res)).toBe(false);
    expect(reads.slice(0, 2).map((r) => r.status)).toEqual([404, 404]);
    const writes = [
      ...(await both('patch another bucket\'s cluster-scoped object', 'PATCH', theirs, { spec: { v: 'patched' } }, 'application/merge-patch+json')),
      ...(await both('delete another bucket\'s cluster-scoped object', 'DELETE', theirs)),
      ...(await both('create a cluster-scoped object in another bucket', 'POST', WIDGETS, { apiVersion: `${GROUP}/v1`, kind: 'ClusterWidget', metadata: { name: `${planted}-planted`, labels: labels(victimNs) } })),
      ...(await both('create an unlabelled cluster-scoped object', 'POST', WIDGETS, { apiVersion: `${GROUP}/v1`, kind: 'ClusterWidget', metadata: { name: `${planted}-unlabelled` } })),
    ];
    expect(writes.map((w) => w.status)).toEqual([403, 403, 403, 403, 403, 403, 403, 403]);
    for (const res of writes) expect(refusedBy(res)).toBe('proxy');
    const after = (await custom.getClusterCustomObject({ group: GROUP, version: 'v1', plural: 'clusterwidgets', name: `${planted}-theirs` })) as { metadata: { resourceVersion: string } };
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    const names = ((await custom.listClusterCustomObject({ group: GROUP, version: 'v1', plural: 'clusterwidgets' })) as { items: { metadata: { name: string } }[] }).items.map((w) => w.metadata.name);
    expect(names.sort()).toEqual([`${planted}-mine`, `${planted}-theirs`]);
    // The shard's own: read, patched, with either identity.
    for (const harness of proxies.values()) {
      expect((await rawRequest(harness.proxy.apiUrl, { method: 'GET', target: `${WIDGETS}/${planted}-mine` })).status).toBe(200);
      const patched = await rawRequest(harness.proxy.apiUrl, { method: 'PATCH', target: `${WIDGETS}/${planted}-mine`, headers: { 'content-type': 'application/merge-patch+json' }, body: '{"spec":{"v":"patched"}}' });
      expect(patched.status).toBe(200);
    }
  });

  it('a list the proxy filters, paged, never hands out a continue token naming what it cut; a forged one is 410 Expired', async () => {
    const seen: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const target = `/api/v1/configmaps?limit=2${token === undefined ? '' : `&continue=${encodeURIComponent(token)}`}`;
      const res = await rawRequest(filtering.proxy.apiUrl, { method: 'GET', target });
      expect(res.status).toBe(200);
      const list = JSON.parse(res.body) as { metadata: { continue?: string; remainingItemCount?: number }; items: { metadata: { namespace: string; name: string } }[] };
      token = list.metadata.continue || undefined;
      expect(list.metadata.remainingItemCount).toBeUndefined();
      // Base64 of the API server's JSON would show the key it resumes from.
      if (token !== undefined) for (const decoded of [token, Buffer.from(token, 'base64').toString('latin1'), Buffer.from(token, 'base64url').toString('latin1')]) expect(decoded).not.toContain(victimNs);
      seen.push(...list.items.map((i) => `${i.metadata.namespace}/${i.metadata.name}`));
      pages++;
    } while (token !== undefined && pages < 5000);
    expect(seen.filter((s) => s.startsWith(victimNs))).toEqual([]);
    expect(seen.filter((s) => s.startsWith(`${ownedNs}/cm-`)).sort()).toEqual([`${ownedNs}/cm-1`, `${ownedNs}/cm-2`, `${ownedNs}/cm-3`]);
    const server = Buffer.from(JSON.stringify({ v: 'meta.k8s.io/v1', rv: 1, start: `${victimNs}/cm-1\u0000` })).toString('base64');
    const forged = await rawRequest(filtering.proxy.apiUrl, { method: 'GET', target: `/api/v1/configmaps?limit=1&continue=${encodeURIComponent(`ctrlmesh.1.${server}`)}` });
    expect(forged.status).toBe(410);
    expect(forged.text).toMatch(/"reason":"Expired"/u);
  });
});
