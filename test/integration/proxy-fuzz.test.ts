import 'reflect-metadata'; // @peculiar/x509 resolves its algorithms through tsyringe, which needs the Reflect metadata API
import { webcrypto } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as x509 from '@peculiar/x509';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  CertificatesV1Api,
  CoreV1Api,
  CustomObjectsApi,
  RbacAuthorizationV1Api,
  Watch,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seededRandom } from '../../bench/harness.js';
import { startApiServer, writeKubeconfig, type ApiServerHandle } from '../../src/dev/index.js';
import { parseSelector } from '../../src/sharding/index.js';
import { shardLockName } from '../../src/proxy/index.js';
import type { ClusterRoute } from '../../src/transport/index.js';
import { HASH_LABEL, bucket, clusterRoute, namespaceOutside, routeTable, settles, silent, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { rawRequest } from './helpers/raw-http.js';
import { kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

x509.cryptoProvider.set(webcrypto);

/** The seed of the generator: the same seed sends the same requests (CTRLMESH_FUZZ_SEED overrides it). */
const SEED = Number(process.env.CTRLMESH_FUZZ_SEED ?? 20261122);
const REQUESTS = Number(process.env.CTRLMESH_FUZZ_REQUESTS ?? 5000);
const CONCURRENCY = 16;
const PROXY_USER = 'ctrlmesh-proxy';
const LOCK = 'demo-leader';
/** What the shard's route gets besides its buckets (empty here: every built-in cluster-scoped write refused). */
const ROUTE_EXTRA: Partial<ClusterRoute> = {};

/** A cluster-scoped custom resource: judged by its hash label, as its list is. */
const WIDGET_GROUP = 'fuzz.example.io';
const WIDGETS = 'clusterwidgets';
const WIDGET_KEY = `${WIDGET_GROUP}/${WIDGETS}`;
const WIDGETS_PATH = `/apis/${WIDGET_GROUP}/v1/${WIDGETS}`;
const TOKEN_SECRET = 'kubernetes.io/service-account-token';
const WRITES = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);
/** Kinds with no storage: a create asks the API server a question, any other verb has no handler. */
const REVIEWS = new Set(['authorization.k8s.io/selfsubjectaccessreviews', 'authentication.k8s.io/tokenreviews']);

interface AuditEvent {
  stage: string;
  verb: string;
  requestURI: string;
  user: { username: string };
  objectRef?: { resource?: string; namespace?: string; name?: string; subresource?: string; apiGroup?: string };
  responseStatus?: { code?: number };
}

interface Metadata {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  labels?: Record<string, string>;
}

interface Watched {
  metadata?: Metadata;
  type?: string;
}

/** One kind the generator targets: where it is served, the names it holds, the subresources worth asking for. */
interface Kind {
  prefix: string;
  resource: string;
  cluster: boolean;
  names: readonly string[];
  subresources?: readonly string[];
}

/**
 * The namespace the API server's RequestInfo reads from a request target: the decoded path after /api/v1 or
 * /apis/<group>/<version> (and a `watch` or `proxy` verb), when it starts `namespaces/<name>`. Outside namespaces the
 * audit's objectRef.namespace is the body's own, which says nothing of where the write went, so the path decides.
 */
function pathNamespace(uri: string): string | undefined {
  let path: string;
  try {
    path = decodeURIComponent(uri.split('?')[0] ?? '');
  } catch {
    return undefined;
  }
  let parts = path.replace(/^\/+|\/+$/gu, '').split('/');
  if (parts[0] === 'api') parts = parts.slice(2);
  else if (parts[0] === 'apis') parts = parts.slice(3);
  else return undefined;
  if (parts[0] === 'watch' || parts[0] === 'proxy') parts = parts.slice(1);
  return parts[0] === 'namespaces' && parts.length > 1 ? parts[1] : undefined;
}

/**
 * Differential fuzzing with the API server as the oracle: generated requests (encodings, segment shapes,
 * parameters, verbs, subresources, upgrade headers, bodies and their labels) go through a proxy owning one bucket of
 * a kube-apiserver that audits every request at Metadata level. Afterwards every request the API server executed for
 * the proxy's identity is judged by its audit objectRef and target: in an owned namespace, or a list/watch/
 * deletecollection whose label selector holds only owned buckets, or the shard's own renamed lock. Outside
 * namespaces no write executes but a Namespace of an owned bucket, a review, or a write of a clusterwidget that is
 * the shard's by its label (before and after); no ServiceAccount token is minted, by TokenRequest or by Secret.
 */
describe('differential fuzz: the API server as the oracle', () => {
  let server: ApiServerHandle;
  let harness: TestProxy;
  let dir: string;
  let auditPath: string;
  const ownedNs = uniqueName('fz-own');
  const owned = new Set([bucket(ownedNs)]);
  const victimNs = namespaceOutside('fz-victim', owned);
  const operatorNs = namespaceOutside('fz-op', new Set([...owned, bucket(victimNs)]));
  const ownedLabel = String(bucket(ownedNs));
  const victimLabel = String(bucket(victimNs));
  /** The clusterwidgets the admin makes: one in the shard's bucket, one in the victim's, one in none. */
  const precreated = { own: 'cw-own', victim: 'cw-victim', none: 'cw-none' } as const;
  const foreign = new Map<string, Metadata>();

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-fuzz-'));
    auditPath = join(dir, 'audit.log');
    server = await startApiServer({ etcd: testbed().etcd, name: uniqueName('fuzz'), dir: join(dir, 'server'), logger: silent, auditLogPath: auditPath });
    const kc = kubeConfigFor(server);
    const admin = kc.makeApiClient(CoreV1Api);
    for (const ns of [ownedNs, victimNs, operatorNs]) {
      const labels = { [HASH_LABEL]: String(bucket(ns)) };
      await admin.createNamespace({ body: { metadata: { name: ns, labels } } });
      await admin.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'cm', labels }, data: { v: ns } } });
      await admin.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'secret', labels }, stringData: { v: ns } } });
      await admin.createNamespacedPod({ namespace: ns, body: { metadata: { name: 'p', labels }, spec: { containers: [{ name: 'c', image: 'busybox' }] } } });
      await admin.createNamespacedService({ namespace: ns, body: { metadata: { name: 's', labels }, spec: { ports: [{ port: 80 }] } } });
      // No controller manager runs here: a token request or token Secret needs the account to exist.
      await admin.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'sa', labels } } });
    }
    // One object of each cluster-scoped built-in, so a write let through would reach something.
    const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createClusterRole({ body: { metadata: { name: 'fz-cr' }, rules: [] } });
    await rbac.createClusterRoleBinding({
      body: { metadata: { name: 'fz-crb' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'fz-cr' }, subjects: [{ kind: 'User', name: 'fz', apiGroup: 'rbac.authorization.k8s.io' }] },
    });
    await kc.makeApiClient(AdmissionregistrationV1Api).createMutatingWebhookConfiguration({ body: { metadata: { name: 'fz-mwc' } } });
    await admin.createNode({ body: { metadata: { name: 'fz-node' } } });
    await admin.createPersistentVolume({ body: { metadata: { name: 'fz-pv' }, spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteOnce'], hostPath: { path: '/tmp/fz' } } } });
    const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
    const keys = await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify']);
    const csr = await x509.Pkcs10CertificateRequestGenerator.create({ name: 'CN=fz', keys, signingAlgorithm: algorithm });
    await kc.makeApiClient(CertificatesV1Api).createCertificateSigningRequest({
      body: { metadata: { name: 'fz-csr' }, spec: { request: Buffer.from(csr.toString('pem')).toString('base64'), signerName: 'example.com/fuzz', usages: ['digital signature'] } },
    });
    await kc.makeApiClient(ApiextensionsV1Api).createCustomResourceDefinition({
      body: {
        metadata: { name: `${WIDGETS}.${WIDGET_GROUP}` },
        spec: {
          group: WIDGET_GROUP,
          scope: 'Cluster',
          names: { plural: WIDGETS, singular: 'clusterwidget', kind: 'ClusterWidget', listKind: 'ClusterWidgetList' },
          versions: [{ name: 'v1', served: true, storage: true, subresources: { status: {} }, schema: { openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true } } }],
        },
      },
    });
    const custom = kc.makeApiClient(CustomObjectsApi);
    const widget = (name: string, labels?: Record<string, string>): Promise<Watched> =>
      custom.createClusterCustomObject({ group: WIDGET_GROUP, version: 'v1', plural: WIDGETS, body: { apiVersion: `${WIDGET_GROUP}/v1`, kind: 'ClusterWidget', metadata: { name, ...(labels ? { labels } : {}) }, spec: { v: name } } });
    // The CRD serves once it is established.
    await settles(async () => widget(precreated.own, { [HASH_LABEL]: ownedLabel }), 30_000);
    foreign.set(precreated.victim, (await widget(precreated.victim, { [HASH_LABEL]: victimLabel })).metadata ?? {});
    foreign.set(precreated.none, (await widget(precreated.none)).metadata ?? {});
    // The proxy's own identity, so its requests stand apart from the set-up's in the audit log.
    const identity = await server.issueClientCertificate(PROXY_USER, ['system:masters']);
    const credentialsPath = join(dir, 'credentials');
    await writeKubeconfig(credentialsPath, [{ ...server, clientCertPem: identity.certPem, clientKeyPem: identity.keyPem }]);
    const table = routeTable({ shard: 'shard-1', operator: `${operatorNs}/demo`, homeCluster: server.name, clusters: [clusterRoute(server, [...owned], ROUTE_EXTRA)] });
    harness = await startTestProxy({ table, credentialsPath, dir: join(dir, 'proxy'), maxBodyBytes: 64 * 1024 });
  }, 180_000);

  afterAll(async () => {
    await harness?.close();
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it(`sends ${REQUESTS} generated requests (seed ${SEED}); the API server executes none on an unowned namespace, kind or bucket`, async () => {
    const kc = kubeConfigFor(server);
    const custom = kc.makeApiClient(CustomObjectsApi);
    const admin = kc.makeApiClient(CoreV1Api);
    // As the injected selector compares it: text, so "07" is no bucket.
    const isOwnedLabel = (labels: Record<string, string> | undefined): boolean => [...owned].some((b) => String(b) === labels?.[HASH_LABEL]);

    // The admin's watches record every state a clusterwidget passes through and every token Secret made, so an
    // object changed and then deleted during the run is judged too.
    const widgetStates = new Map<string, { resourceVersion: string; owned: boolean; added: boolean; labels: Record<string, string> }[]>();
    const record = (object: Watched, added: boolean): void => {
      const { name = '', resourceVersion = '', labels = {} } = object.metadata ?? {};
      widgetStates.set(name, [...(widgetStates.get(name) ?? []), { resourceVersion, owned: isOwnedLabel(labels), added, labels }]);
    };
    const before = (await custom.listClusterCustomObject({ group: WIDGET_GROUP, version: 'v1', plural: WIDGETS })) as { metadata?: { resourceVersion?: string }; items?: Watched[] };
    for (const item of before.items ?? []) record(item, true);
    const tokenSecrets = new Map<string, Metadata>();
    const watchErrors: unknown[] = [];
    let watching = true;
    const watchEnded = (err: unknown): void => void (watching && err !== null && err !== undefined ? watchErrors.push(err) : undefined);
    const watch = new Watch(kc);
    const widgetWatch = await watch.watch(WIDGETS_PATH, { resourceVersion: before.metadata?.resourceVersion ?? '' }, (phase: string, object: Watched) => {
      if (phase === 'ADDED' || phase === 'MODIFIED') record(object, phase === 'ADDED');
    }, watchEnded);
    const secretsBefore = await admin.listSecretForAllNamespaces();
    const secretWatch = await watch.watch('/api/v1/secrets', { resourceVersion: secretsBefore.metadata?.resourceVersion ?? '' }, (phase: string, object: Watched) => {
      if (phase === 'ADDED' && object.type === TOKEN_SECRET) tokenSecrets.set(`${object.metadata?.namespace ?? ''}/${object.metadata?.name ?? ''}`, object.metadata ?? {});
    }, watchEnded);

    const random = seededRandom(SEED);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const chance = (p: number): boolean => random() < p;
    /**
     * A plain request is well formed (no odd encoding, segment, parameter or header): most odd ones are refused for
     * their shape alone, and plain ones reach the judgement of kinds, buckets and bodies.
     */
    let plain = false;
    const odd = (p: number): boolean => !plain && chance(p);
    const encode = (text: string): string =>
      [...text].map((c) => (chance(0.3) ? `%${c.charCodeAt(0).toString(16)[chance(0.5) ? 'toUpperCase' : 'toLowerCase']()}` : c)).join('');
    const maybeEncode = (text: string): string => (odd(0.25) ? encode(text) : text);
    const namespaces = [ownedNs, victimNs, operatorNs];
    const segmentShape = (): string =>
      pick([
        () => maybeEncode(pick(namespaces)),
        () => `${pick(namespaces)}%2F${pick(['configmaps', 'secrets'])}`,
        () => pick(['', '.', '..', '%2e', '%2E%2e', '%00']),
        () => `${ownedNs}%2F..%2F${victimNs}`,
      ])();
    const widgets: Kind = { prefix: `/apis/${WIDGET_GROUP}/v1`, resource: WIDGETS, cluster: true, names: [precreated.own, precreated.victim, precreated.none, 'new', 'new-2', 'fz-0', 'fz-1', 'fz-2'], subresources: ['status'] };
    const kinds: readonly Kind[] = [
      { prefix: '/api/v1', resource: 'configmaps', cluster: false, names: ['cm'] },
      { prefix: '/api/v1', resource: 'secrets', cluster: false, names: ['secret', 'ctrlmesh-proxy', 'ctrlmesh-proxy.c.shard-2', 'tok'] },
      { prefix: '/api/v1', resource: 'pods', cluster: false, names: ['p'] },
      { prefix: '/api/v1', resource: 'services', cluster: false, names: ['s', 's:80'] },
      { prefix: '/api/v1', resource: 'endpoints', cluster: false, names: ['s'] },
      { prefix: '/apis/coordination.k8s.io/v1', resource: 'leases', cluster: false, names: [LOCK] },
      { prefix: '/apis/apps/v1', resource: 'deployments', cluster: false, names: ['d'] },
      { prefix: '/api/v1', resource: 'namespaces', cluster: false, names: [] },
      { prefix: '/api/v1', resource: 'serviceaccounts', cluster: false, names: ['sa', 'default'], subresources: ['token'] },
      { prefix: '/apis/rbac.authorization.k8s.io/v1', resource: 'clusterrolebindings', cluster: true, names: ['fz-crb', 'new'] },
      { prefix: '/apis/rbac.authorization.k8s.io/v1', resource: 'clusterroles', cluster: true, names: ['fz-cr', 'new'] },
      { prefix: '/apis/admissionregistration.k8s.io/v1', resource: 'mutatingwebhookconfigurations', cluster: true, names: ['fz-mwc'] },
      { prefix: '/api/v1', resource: 'nodes', cluster: true, names: ['fz-node'], subresources: ['status', 'proxy'] },
      { prefix: '/api/v1', resource: 'persistentvolumes', cluster: true, names: ['fz-pv'], subresources: ['status'] },
      { prefix: '/apis/certificates.k8s.io/v1', resource: 'certificatesigningrequests', cluster: true, names: ['fz-csr'], subresources: ['approval', 'status'] },
      { prefix: '/apis/apiextensions.k8s.io/v1', resource: 'customresourcedefinitions', cluster: true, names: [`${WIDGETS}.${WIDGET_GROUP}`, `x.${WIDGET_GROUP}`], subresources: ['status'] },
      // Weighted: the one kind whose objects outside namespaces a shard may write, judged by their labels.
      widgets,
      widgets,
      widgets,
      widgets,
      { prefix: '/apis/authorization.k8s.io/v1', resource: 'selfsubjectaccessreviews', cluster: true, names: [] },
    ];
    /** The request target's path, and the object it names (its body names that one mostly). */
    const path = (kind: Kind, method: string): { text: string; name?: string } => {
      const { prefix, resource } = kind;
      const parts: string[] = [prefix.split('/').map((s) => (s === '' ? s : maybeEncode(s))).join('/')];
      if (odd(0.1)) parts.push(maybeEncode(pick(['watch', 'proxy'])));
      const scope = random();
      let name: string | undefined;
      if (resource === 'namespaces') {
        if (chance(0.8)) {
          name = chance(0.85) || plain ? pick(namespaces) : undefined;
          parts.push('namespaces', name === undefined ? segmentShape() : maybeEncode(name));
        } else parts.push('namespaces');
      }
      // A cluster-scoped kind is asked for under a namespace now and then, as a namespaced one is across them.
      else if (scope < (kind.cluster ? 0.12 : 0.75)) parts.push(maybeEncode('namespaces'), chance(0.85) || plain ? maybeEncode(pick(namespaces)) : segmentShape(), maybeEncode(resource));
      else parts.push(maybeEncode(resource));
      // A plain create names no object in its path (the body does); a plain write to one object does.
      const named = plain ? method !== 'POST' && (method !== 'GET' || chance(0.5)) && chance(0.95) : chance(0.55);
      if (resource !== 'namespaces' && named) {
        const candidates = plain ? ['cm', 'secret', 'p', 's', LOCK] : ['cm', 'secret', 'p', 's', LOCK, 's:80', '..', `x%2F..%2F${victimNs}`];
        name = kind.names.length > 0 && chance(0.7) ? pick(kind.names) : pick(candidates);
        parts.push(maybeEncode(name));
      }
      if (kind.subresources && chance(plain ? 0.2 : 0.35)) parts.push(pick(kind.subresources));
      else if (odd(0.25)) parts.push(pick(['status', 'exec', 'attach', 'log', 'proxy', 'finalize', 'portforward', 'binding']));
      if (odd(0.08)) parts.push(pick(['metrics', '', 'x/y']));
      let text = parts.join('/');
      if (odd(0.05)) text = text.replace('/', '//');
      if (odd(0.05)) text += '/';
      if (odd(0.06)) text = `/clusters/${maybeEncode(server.name)}${text}`;
      return { text, ...(name === undefined ? {} : { name }) };
    };
    const query = (contentType: string | undefined): string => {
      const params: string[] = [];
      const watchValue = plain ? pick(['true', '1', 'false']) : pick(['true', 'True', 'TRUE', '1', 'yes', '', 'false', '0', 'FALSE', 'fal%C5%BFe']);
      if (chance(plain ? 0.15 : 0.45)) params.push(`${plain ? 'watch' : pick(['watch', 'w%61tch', 'WATCH'])}${odd(0.1) ? '' : `=${watchValue}`}`);
      if (odd(0.08)) params.push('watch=1');
      if (chance(plain ? 0.15 : 0.3)) {
        params.push(`labelSelector=${encodeURIComponent(pick([`${HASH_LABEL}=${victimLabel}`, `!${HASH_LABEL}`, `${HASH_LABEL} notin (${ownedLabel})`, 'app in (a', 'app=x', `${HASH_LABEL} in (${victimLabel},${ownedLabel})`, '']))}`);
      }
      if (chance(0.2)) params.push(`fieldSelector=${encodeURIComponent(pick([`metadata.namespace=${victimNs}`, 'metadata.name=cm', `metadata.name=${LOCK}`, `metadata.name=${precreated.victim}`]))}`);
      if (odd(0.05)) params.push(`labelSelector=app%3Dy`);
      if (odd(0.05)) params.push('a=b;watch=true');
      if (contentType === 'application/apply-patch+yaml' || chance(0.03)) params.push(`fieldManager=${pick(['fz', 'kubectl'])}`);
      if (chance(0.03)) params.push(`dryRun=${pick(['All', 'all', ''])}`);
      if (chance(0.6)) params.push('timeoutSeconds=1');
      return params.length === 0 ? '' : `?${params.join('&')}`;
    };
    const headers = (): Record<string, string> => {
      const out: Record<string, string> = {};
      if (odd(0.12)) {
        out.connection = pick(['Upgrade', 'upgrade', 'Upgrade, HTTP2-Settings']);
        out.upgrade = pick(['websocket', 'SPDY/3.1', 'h2c', 'foo']);
        out['sec-websocket-key'] = 'dGhlIHNhbXBsZSBub25jZQ==';
        out['sec-websocket-version'] = '13';
      } else if (odd(0.05)) {
        out.upgrade = 'websocket';
      }
      if (odd(0.05)) out['impersonate-user'] = 'attacker';
      return out;
    };
    const labels = (): Record<string, string> | null | undefined =>
      pick<Record<string, string> | null | undefined>([{ [HASH_LABEL]: ownedLabel }, { [HASH_LABEL]: ownedLabel }, { [HASH_LABEL]: ownedLabel }, { [HASH_LABEL]: victimLabel }, { [HASH_LABEL]: victimLabel }, undefined, {}, { app: 'x' }, { [HASH_LABEL]: `0${ownedLabel}` }, null]);
    /** What each kind's write would need to succeed, so a write let through changes something. */
    const kindFields = (kind: Kind, metadata: Record<string, unknown>): Record<string, unknown> => {
      switch (kind.resource) {
        case WIDGETS:
          return chance(0.8) ? { apiVersion: `${WIDGET_GROUP}/v1`, kind: 'ClusterWidget', spec: { size: Math.floor(random() * 9) } } : {};
        case 'secrets':
          if (!chance(0.4)) return {};
          metadata.annotations = { 'kubernetes.io/service-account.name': pick(['sa', 'default']) };
          return { type: TOKEN_SECRET };
        case 'serviceaccounts':
          return chance(0.3) ? {} : { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { audiences: ['fz'] } };
        case 'clusterrolebindings':
          return { roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' }, subjects: [{ kind: 'User', name: 'attacker', apiGroup: 'rbac.authorization.k8s.io' }] };
        case 'clusterroles':
          return { rules: [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }] };
        case 'certificatesigningrequests':
          return { apiVersion: 'certificates.k8s.io/v1', kind: 'CertificateSigningRequest', status: { conditions: [{ type: 'Approved', status: 'True', reason: 'fz', message: 'fz' }] } };
        case 'selfsubjectaccessreviews':
          return { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: { resourceAttributes: { verb: 'get', resource: 'pods' } } };
        default:
          return {};
      }
    };
    const body = (kind: Kind, contentType: string, target: string | undefined): string => {
      const chosen = labels();
      if (contentType === 'application/json-patch+json') return JSON.stringify([{ op: pick(['add', 'replace']), path: '/metadata/labels', value: chosen ?? {} }]);
      // Names a create may take (a few, so later writes find what it made) besides the kind's own.
      const names = [...kind.names, 'cm', LOCK, 'new', pick(namespaces), `fz-${Math.floor(random() * 3)}`];
      const metadata: Record<string, unknown> = chance(0.1) ? { generateName: pick(['gen-', 'ctrlmesh-proxy.', 'cw-']) } : { name: target !== undefined && chance(0.8) ? target : pick(names) };
      if (chance(0.7)) metadata.namespace = pick(namespaces);
      if (chosen !== undefined) metadata.labels = chosen;
      const text = JSON.stringify({ metadata, data: { x: '1' }, spec: { holderIdentity: 'x' }, ...kindFields(kind, metadata) });
      // Shapes two JSON readers might read apart: a second metadata (the last wins in both) and an escaped label key.
      if (odd(0.04)) return `{"metadata":{"name":"new","labels":{"${HASH_LABEL}":"${pick([ownedLabel, victimLabel])}"}},${text.slice(1)}`;
      if (odd(0.04)) return `${text.slice(0, -1)},"metadata":{"name":"new-2","labels":{"${HASH_LABEL}":"${pick([ownedLabel, victimLabel])}"}}}`;
      if (odd(0.05)) return text.replace(`"${HASH_LABEL}"`, `"\\u0063trlmesh.kusionstack.io\\/shard-hash"`);
      return text;
    };

    const widgetUids = [...foreign.values()].map((m) => m.uid ?? '').filter((u) => u !== '');
    const outcomes = new Map<number, number>();
    const leaks: string[] = [];
    let sent = 0;
    const worker = async (): Promise<void> => {
      while (sent < REQUESTS) {
        sent++;
        plain = chance(0.4);
        const method = pick(['GET', 'GET', 'GET', 'GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
        const kind = pick(kinds);
        const withBody = method === 'POST' || method === 'PUT' || method === 'PATCH';
        const h = headers();
        const contentType =
          method === 'PATCH'
            ? pick(['application/merge-patch+json', 'application/merge-patch+json', 'application/strategic-merge-patch+json', 'application/json-patch+json', 'application/apply-patch+yaml'])
            : pick(['application/json', 'application/json', 'application/json', 'application/json; charset=utf-8', 'application/yaml']);
        if (withBody) h['content-type'] = contentType;
        const where = path(kind, method);
        const target = `${where.text}${query(withBody ? contentType : undefined)}`;
        const res = await rawRequest(harness.proxy.apiUrl, { method, target, headers: h, ...(withBody ? { body: body(kind, contentType, where.name) } : {}), readMs: 2500 });
        outcomes.set(res.status, (outcomes.get(res.status) ?? 0) + 1);
        // A clusterwidget of another bucket is read by the proxy's identity too: only the answer shows a leak.
        if (widgetUids.some((uid) => res.body.includes(uid))) leaks.push(`${method} ${target} -> ${res.status}`);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    await new Promise((resolve) => setTimeout(resolve, 1000));

    // The watches have caught up once they show every clusterwidget as it is now.
    const after = ((await custom.listClusterCustomObject({ group: WIDGET_GROUP, version: 'v1', plural: WIDGETS })) as { items?: Watched[] }).items ?? [];
    await settles(() => {
      for (const item of after) expect(widgetStates.get(item.metadata?.name ?? '')?.some((s) => s.resourceVersion === item.metadata?.resourceVersion)).toBe(true);
    });
    for (const s of (await admin.listSecretForAllNamespaces({ fieldSelector: `type=${TOKEN_SECRET}` })).items) tokenSecrets.set(`${s.metadata?.namespace ?? ''}/${s.metadata?.name ?? ''}`, s.metadata ?? {});
    watching = false;
    widgetWatch.abort();
    secretWatch.abort();

    const events = (await readFile(auditPath, 'utf8'))
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as AuditEvent)
      .filter((e) => e.user.username === PROXY_USER && e.stage === 'ResponseComplete');
    const ownedOnly = (uri: string): boolean => {
      const selector = new URL(uri, 'https://x').searchParams.get('labelSelector') ?? '';
      const hash = parseSelector(selector).filter((r) => r.key === HASH_LABEL);
      const matchesNothing = hash.some((r) => r.operator === 'Exists') && hash.some((r) => r.operator === 'DoesNotExist');
      return matchesNothing || hash.some((r) => r.operator === 'In' && r.values.every((v) => owned.has(Number(v))));
    };
    /**
     * Whether a write to the clusterwidget `name` (`create`: one that made it) reached one of the shard's. A create
     * made what the watch saw added under the name; another write reached a state the watch saw, one of the shard's
     * unless the object only ever was another bucket's. A write moving one of the shard's out of its buckets is
     * judged by the states it left behind (below).
     */
    const widgetWriteOwned = (verb: string, name: string | undefined): boolean => {
      const states = widgetStates.get(name ?? '') ?? [];
      if (foreign.has(name ?? '') || states.length === 0) return false;
      return verb === 'create' ? states.filter((s) => s.added).every((s) => s.owned) : states.some((s) => s.owned);
    };
    const outside = (e: AuditEvent): boolean => e.objectRef?.resource !== 'namespaces' && pathNamespace(e.requestURI) === undefined;
    /**
     * A write the API server has no handler for, so it executed nothing: 405 (e.g. a PUT of a collection, or a
     * collection delete across namespaces), or an update or patch naming no object (its handler requires the name
     * before reading the body, so the audit names none).
     */
    const unroutable = (e: AuditEvent): boolean => e.responseStatus?.code === 405 || ((e.verb === 'update' || e.verb === 'patch') && (e.objectRef?.name ?? '') === '');
    const clusterBuiltIns = new Set(kinds.filter((k) => k.cluster && k.resource !== WIDGETS).map((k) => k.resource));
    /** Why an executed request is a violation, or undefined when the shard may execute it. */
    const judge = (e: AuditEvent): string | undefined => {
      const ref = e.objectRef ?? {};
      const key = `${ref.apiGroup ?? ''}/${ref.resource ?? ''}`;
      if (ref.resource === 'serviceaccounts' && ref.subresource === 'token' && e.verb === 'create') return 'a ServiceAccount token minted';
      if (ref.resource === 'namespaces' && (ref.apiGroup ?? '') === '') {
        // A Namespace belongs to its own bucket: named by the path, or, created, by its body.
        const target = pathNamespace(e.requestURI) ?? (e.verb === 'create' ? ref.name : undefined);
        if (target === undefined || target === '') return WRITES.has(e.verb) && !unroutable(e) ? 'a Namespace write that names none' : undefined;
        return owned.has(bucket(target)) ? undefined : 'a Namespace of another bucket';
      }
      if (outside(e)) {
        if (unroutable(e)) return undefined;
        if (WIDGET_KEY === key) {
          if (e.verb === 'list' || e.verb === 'watch' || e.verb === 'deletecollection') return ownedOnly(e.requestURI) ? undefined : 'clusterwidgets selected beyond the shard';
          if (!WRITES.has(e.verb)) return undefined;
          // A create that failed made nothing; one that succeeded made what the watch saw under its name (by
          // generateName: under a name the audit does not give, judged with every state the watch saw, below).
          if (e.verb === 'create' && ((e.responseStatus?.code ?? 0) >= 300 || (ref.name ?? '') === '')) return undefined;
          return widgetWriteOwned(e.verb, ref.name) ? undefined : 'a clusterwidget write outside the shard';
        }
        // Built-in cluster-scoped kinds are read whole; a namespaced kind read across namespaces only under the selector.
        if ((e.verb === 'list' || e.verb === 'watch') && !clusterBuiltIns.has(ref.resource ?? '')) return ownedOnly(e.requestURI) ? undefined : 'selected across namespaces beyond the shard';
        if (!WRITES.has(e.verb) || REVIEWS.has(key)) return undefined;
        return 'a cluster-scoped write';
      }
      const ns = ref.namespace;
      if (ns === undefined || ns === '' || owned.has(bucket(ns))) return undefined;
      if (e.verb === 'list' || e.verb === 'watch' || e.verb === 'deletecollection') return ownedOnly(e.requestURI) ? undefined : 'a namespace of another bucket selected';
      const lock = ns === operatorNs && ['leases', 'configmaps', 'endpoints'].includes(ref.resource ?? '') && ref.name === shardLockName(LOCK, 'shard-1') && ref.subresource === undefined;
      return lock ? undefined : 'in a namespace of another bucket';
    };
    const violations = events.flatMap((e) => {
      const why = judge(e);
      return why === undefined ? [] : [`${why}: ${e.verb} ${e.requestURI} -> ${e.responseStatus?.code ?? '?'}`];
    });

    // Afterwards, as the admin sees it: the other buckets' clusterwidgets untouched, none made in a bucket not owned.
    for (const [name, was] of foreign) {
      const now = after.find((w) => w.metadata?.name === name);
      if (now?.metadata?.resourceVersion !== was.resourceVersion) violations.push(`clusterwidget ${name} changed: resourceVersion ${was.resourceVersion} -> ${now?.metadata?.resourceVersion ?? 'deleted'}`);
    }
    for (const w of after) {
      const name = w.metadata?.name ?? '';
      if (!foreign.has(name) && !isOwnedLabel(w.metadata?.labels)) violations.push(`clusterwidget ${name} exists outside the shard: labels ${JSON.stringify(w.metadata?.labels ?? {})}`);
    }
    for (const [name, states] of widgetStates) {
      const left = states.find((s) => !s.owned);
      if (foreign.has(name) || !left) continue;
      // The writes that may have moved it, for the report: the audit gives no body.
      const by = events
        .filter((e) => e.objectRef?.resource === WIDGETS && e.objectRef.name === name && WRITES.has(e.verb) && (e.responseStatus?.code ?? 0) < 300)
        .map((e) => `${e.verb} ${e.requestURI} -> ${e.responseStatus?.code ?? '?'}`);
      violations.push(`clusterwidget ${name} was outside the shard at resourceVersion ${left.resourceVersion}: labels ${JSON.stringify(left.labels)}; written by ${by.join(', ')}`);
    }
    // No controller manager runs on this API server, so no token Secret is its own: any made by the proxy's user is one.
    const secretCreates = events.filter((e) => e.verb === 'create' && e.objectRef?.resource === 'secrets' && e.objectRef.subresource === undefined && (e.responseStatus?.code ?? 0) < 300);
    for (const s of tokenSecrets.values()) {
      // A create by generateName names nothing in the audit: any in the Secret's namespace may have made it.
      const made = secretCreates.some((e) => e.objectRef?.namespace === s.namespace && [undefined, '', s.name].includes(e.objectRef?.name));
      if (made) violations.push(`token Secret ${s.namespace ?? ''}/${s.name ?? ''} created through the proxy`);
    }
    violations.push(...leaks.map((l) => `a clusterwidget of another bucket answered: ${l}`));

    const byVerb: Record<string, number> = {};
    for (const e of events) byVerb[e.verb] = (byVerb[e.verb] ?? 0) + 1;
    const clusterWrites = events.filter((e) => WRITES.has(e.verb) && outside(e) && !unroutable(e));
    const clusterWritesByResource: Record<string, number> = {};
    for (const e of clusterWrites) {
      const what = `${e.verb} ${e.objectRef?.resource ?? ''}${e.objectRef?.subresource ? `/${e.objectRef.subresource}` : ''}`;
      clusterWritesByResource[what] = (clusterWritesByResource[what] ?? 0) + 1;
    }
    const unownedSelected = events.filter((e) => e.objectRef?.namespace && !outside(e) && !owned.has(bucket(e.objectRef.namespace))).length;
    console.log(
      JSON.stringify({
        seed: SEED,
        sent: REQUESTS,
        answered: Object.fromEntries([...outcomes].sort((x, y) => x[0] - y[0])),
        executed: events.length,
        executedByVerb: byVerb,
        executedInUnownedNamespaceUnderShardSelectorOrLock: unownedSelected,
        clusterScopedWritesExecuted: clusterWrites.length,
        unroutableWritesForwarded: events.filter((e) => WRITES.has(e.verb) && unroutable(e)).length,
        clusterScopedWritesByResource: clusterWritesByResource,
        clusterwidgetsSeen: widgetStates.size,
        tokenSecretsSeen: tokenSecrets.size,
        watchErrors: watchErrors.length,
        violations: violations.length,
      }),
    );
    // A watch that failed would have left states unjudged.
    expect(watchErrors).toEqual([]);
    expect(violations).toEqual([]);
    expect(events.length).toBeGreaterThan(REQUESTS / 10);
  }, 600_000);
});
