import { createServer, type Server } from 'node:https';
import { CoreV1Api } from '@kubernetes/client-node';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bucketOf } from '../../src/sharding/index.js';
import { createCertificateAuthority, issueCertificate } from '../../src/tls/index.js';
import { clusterRoute, routeTable, settles, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { cluster, kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

const MINE = Array.from({ length: 16 }, (_, i) => i);
/** A custom resource with a status subresource, whose strategy copies the stored metadata over a patch's. */
const GROUP = 'uidrace.ctrlmesh.test';
const mine = (uid: string): boolean => MINE.includes(bucketOf(uid, { algorithm: 'fnv-range', bucketCount: 32 }));

/**
 * A write to an object sharded by uid, raced: the proxy reads the object, judges its uid, and forwards the write with
 * that uid as a precondition. A validating webhook on the API server holds the forwarded update while the test
 * gives the name to an object in another shard's bucket; the API server then applies the update to whatever the
 * name holds, and only the precondition keeps it off the other shard's object. A client's own uid in the body must
 * not replace the judged one: "" is no precondition to the API server, and such a write would land on another
 * shard's object.
 */
describe('a write to an object sharded by uid, raced by a delete and re-create', () => {
  const bed = cluster(0);
  const admin = kubeConfigFor(bed).makeApiClient(CoreV1Api);
  const namespace = uniqueName('uid-race');
  const webhookName = `${namespace}.ctrlmesh.test`;
  const widgets = `/apis/${GROUP}/v1/namespaces/${namespace}/widgets`;
  const asAdmin = new Agent({ connect: { ca: bed.caPem, cert: bed.clientCertPem, key: bed.clientKeyPem } });
  let harness: TestProxy;
  let hook: Server;
  /** Run while the API server waits for the webhook's answer to an update marked `race`. */
  let whileHeld: (() => Promise<void>) | undefined;

  /** Creates `name` until its uid falls in this shard's buckets (or in another's). */
  const createIn = async (name: string, inShard: boolean): Promise<string> => {
    for (;;) {
      const uid = (await admin.createNamespacedConfigMap({ namespace, body: { metadata: { name } } })).metadata!.uid!;
      if (mine(uid) === inShard) return uid;
      await admin.deleteNamespacedConfigMap({ name, namespace });
    }
  };
  const direct = async (method: string, path: string, body?: unknown): Promise<{ status: number; json: { metadata?: { uid?: string }; status?: Record<string, string> } }> => {
    const res = await undiciFetch(`${bed.server}${path}`, { method, dispatcher: asAdmin, headers: { 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    return { status: res.status, json: (await res.json()) as never };
  };
  const widgetIn = async (name: string, inShard: boolean): Promise<string> => {
    for (;;) {
      const made = await direct('POST', widgets, { apiVersion: `${GROUP}/v1`, kind: 'Widget', metadata: { name } });
      expect(made.status).toBe(201);
      if (mine(made.json.metadata!.uid!) === inShard) return made.json.metadata!.uid!;
      await direct('DELETE', `${widgets}/${name}`);
      await settles(async () => expect((await direct('GET', `${widgets}/${name}`)).status).toBe(404));
    }
  };

  beforeAll(async () => {
    await admin.createNamespace({ body: { metadata: { name: namespace } } });
    const crd = await direct('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: `widgets.${GROUP}` },
      spec: {
        group: GROUP,
        scope: 'Namespaced',
        names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
        versions: [{ name: 'v1', served: true, storage: true, subresources: { status: {} }, schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } }],
      },
    });
    expect([201, 409]).toContain(crd.status);
    await settles(async () => expect((await direct('GET', widgets)).status).toBe(200), 30_000);
    const ca = await createCertificateAuthority({ commonName: 'uid-race-webhook-ca' });
    const cert = await issueCertificate({ ca, commonName: 'uid-race-webhook', usage: 'server', ipAddresses: ['127.0.0.1'] });
    hook = createServer({ key: cert.keyPem, cert: cert.certPem }, (req, res) => {
      let body = '';
      req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
      req.on('end', () => {
        const review = JSON.parse(body) as { request: { uid: string; object?: { data?: Record<string, string>; status?: Record<string, string> } } };
        const allow = (): void =>
          void res
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: review.request.uid, allowed: true } }));
        const held = whileHeld;
        whileHeld = undefined;
        const object = review.request.object;
        if ((object?.data?.race ?? object?.status?.race) === undefined || held === undefined) return allow();
        void held().then(allow);
      });
    });
    await new Promise<void>((resolve) => hook.listen(0, '127.0.0.1', resolve));
    const { port } = hook.address() as { port: number };
    const res = await undiciFetch(`${bed.server}/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations`, {
      method: 'POST',
      dispatcher: asAdmin,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'ValidatingWebhookConfiguration',
        metadata: { name: webhookName },
        webhooks: [
          {
            name: webhookName,
            admissionReviewVersions: ['v1'],
            sideEffects: 'None',
            failurePolicy: 'Fail',
            clientConfig: { url: `https://127.0.0.1:${port}/`, caBundle: Buffer.from(ca.certPem).toString('base64') },
            rules: [{ apiGroups: ['', GROUP], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['configmaps', 'widgets/status'], scope: 'Namespaced' }],
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } },
          },
        ],
      }),
    });
    expect(res.status).toBe(201);
    harness = await startTestProxy({
      table: {
        ...routeTable({
          shard: 'shard-0',
          homeCluster: bed.name,
          clusters: [
            clusterRoute(bed, MINE, {
              selection: 'proxyFilter',
              objectSharding: [
                { apiGroups: [''], resources: ['configmaps'] },
                { apiGroups: [GROUP], resources: ['widgets'] },
              ],
            }),
          ],
        }),
        hashAlgorithm: 'fnv-range',
      },
      credentialsPath: testbed().kubeconfigPath,
    });
  }, 120_000);

  afterAll(async () => {
    await harness?.close();
    hook?.close();
    await undiciFetch(`${bed.server}/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/${webhookName}`, { method: 'DELETE', dispatcher: asAdmin });
    await undiciFetch(`${bed.server}/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.${GROUP}`, { method: 'DELETE', dispatcher: asAdmin });
    await asAdmin.close();
    await admin.deleteNamespace({ name: namespace }).catch(() => undefined);
  });

  /** Sends `init` to the shard's object `name`; while the API server holds the update, the name goes to another shard. */
  const raced = async (name: string, init: RequestInit): Promise<{ status: number; text: string }> => {
    await createIn(name, true);
    whileHeld = async () => {
      await admin.deleteNamespacedConfigMap({ name, namespace });
      await createIn(name, false);
    };
    const res = await fetch(`${harness.proxy.apiUrl}/api/v1/namespaces/${namespace}/configmaps/${name}`, init);
    return { status: res.status, text: await res.text() };
  };
  const after = async (name: string): Promise<{ uid: string; data: Record<string, string> | undefined }> => {
    const now = await admin.readNamespacedConfigMap({ name, namespace });
    return { uid: now.metadata!.uid!, data: now.data };
  };

  it('without a uid of its own, the write carries the judged one: the API server refuses it on the other shard\'s object', async () => {
    const name = 'plain';
    const { status } = await raced(name, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ metadata: { name, namespace }, data: { race: 'yes' } }) });
    const now = await after(name);
    // The race happened: the name is another shard's object now, and the update did not reach it.
    expect(mine(now.uid)).toBe(false);
    expect(status).toBe(409);
    expect(now.data?.race).toBeUndefined();
  });

  it.each([
    ['PUT', 'application/json'],
    ['PATCH', 'application/merge-patch+json'],
    ['PATCH', 'application/strategic-merge-patch+json'],
  ])('a %s (%s) naming uid "" is refused, and another shard\'s object is never written', async (method, type) => {
    const name = `empty-${type.split('/')[1]!.split('+')[0]}`;
    const body = method === 'PUT' ? { metadata: { name, namespace, uid: '' }, data: { race: 'yes' } } : { metadata: { uid: '' }, data: { race: 'yes' } };
    const { status, text } = await raced(name, { method, headers: { 'content-type': type }, body: JSON.stringify(body) });
    expect(status, text).toBe(409);
    const now = await after(name);
    expect(now.data?.race).toBeUndefined();
    // Refused before it was forwarded: the API server never held it, the name is still the shard's object.
    expect(mine(now.uid)).toBe(true);
    whileHeld = undefined;
  });

  it("a merge patch of a custom resource's status, raced, is refused: the other shard's object keeps its status", async () => {
    const name = 'widget';
    await widgetIn(name, true);
    whileHeld = async () => {
      await direct('DELETE', `${widgets}/${name}`);
      await settles(async () => expect((await direct('GET', `${widgets}/${name}`)).status).toBe(404));
      await widgetIn(name, false);
    };
    // The status strategy copies the stored metadata over the patch's, uid included: only the resourceVersion the
    // proxy adds holds the patch to the object judged.
    const res = await fetch(`${harness.proxy.apiUrl}${widgets}/${name}/status`, { method: 'PATCH', headers: { 'content-type': 'application/merge-patch+json' }, body: JSON.stringify({ status: { race: 'yes' } }) });
    expect(res.status, await res.text()).toBe(409);
    const now = await direct('GET', `${widgets}/${name}`);
    expect(mine(now.json.metadata!.uid!)).toBe(false);
    expect(now.json.status?.race).toBeUndefined();
  }, 60_000);
});
