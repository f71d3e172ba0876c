import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seededRandom } from '../../bench/harness.js';
import { startApiServer, writeKubeconfig, type ApiServerHandle } from '../../src/dev/index.js';
import { parseSelector } from '../../src/sharding/index.js';
import { shardLockName } from '../../src/proxy/index.js';
import { HASH_LABEL, bucket, clusterRoute, namespaceOutside, routeTable, silent, startTestProxy, type TestProxy } from './helpers/proxy.js';
import { rawRequest } from './helpers/raw-http.js';
import { kubeConfigFor, testbed, uniqueName } from './helpers/testbed.js';

/** The seed of the generator: the same seed sends the same requests (CTRLMESH_FUZZ_SEED overrides it). */
const SEED = Number(process.env.CTRLMESH_FUZZ_SEED ?? 20261122);
const REQUESTS = Number(process.env.CTRLMESH_FUZZ_REQUESTS ?? 5000);
const CONCURRENCY = 16;
const PROXY_USER = 'ctrlmesh-proxy';
const LOCK = 'demo-leader';

interface AuditEvent {
  stage: string;
  verb: string;
  requestURI: string;
  user: { username: string };
  objectRef?: { resource?: string; namespace?: string; name?: string; subresource?: string };
  responseStatus?: { code?: number };
}

/**
 * Differential fuzzing with the API server as the oracle: generated requests (encodings, segment shapes,
 * parameters, verbs, subresources, upgrade headers) go through a proxy owning one bucket of a kube-apiserver that
 * audits every request at Metadata level. Afterwards every request the API server executed for the proxy's
 * identity is judged by its audit objectRef: in an owned namespace, or a list/watch/deletecollection whose label
 * selector holds only owned buckets, or the shard's own renamed lock. Nothing else may have executed.
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

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-fuzz-'));
    auditPath = join(dir, 'audit.log');
    server = await startApiServer({ etcd: testbed().etcd, name: uniqueName('fuzz'), dir: join(dir, 'server'), logger: silent, auditLogPath: auditPath });
    const admin = kubeConfigFor(server).makeApiClient(CoreV1Api);
    for (const ns of [ownedNs, victimNs, operatorNs]) {
      const labels = { [HASH_LABEL]: String(bucket(ns)) };
      await admin.createNamespace({ body: { metadata: { name: ns, labels } } });
      await admin.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'cm', labels }, data: { v: ns } } });
      await admin.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'secret', labels }, stringData: { v: ns } } });
      await admin.createNamespacedPod({ namespace: ns, body: { metadata: { name: 'p', labels }, spec: { containers: [{ name: 'c', image: 'busybox' }] } } });
      await admin.createNamespacedService({ namespace: ns, body: { metadata: { name: 's', labels }, spec: { ports: [{ port: 80 }] } } });
    }
    // The proxy's own identity, so its requests stand apart from the set-up's in the audit log.
    const identity = await server.issueClientCertificate(PROXY_USER, ['system:masters']);
    const credentialsPath = join(dir, 'credentials');
    await writeKubeconfig(credentialsPath, [{ ...server, clientCertPem: identity.certPem, clientKeyPem: identity.keyPem }]);
    const table = routeTable({ shard: 'shard-1', operator: `${operatorNs}/demo`, homeCluster: server.name, clusters: [clusterRoute(server, [...owned])] });
    harness = await startTestProxy({ table, credentialsPath, dir: join(dir, 'proxy'), maxBodyBytes: 64 * 1024 });
  }, 180_000);

  afterAll(async () => {
    await harness?.close();
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it(`sends ${REQUESTS} generated requests (seed ${SEED}); the API server executes none on an unowned namespace`, async () => {
    const random = seededRandom(SEED);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const chance = (p: number): boolean => random() < p;
    const encode = (text: string): string =>
      [...text].map((c) => (chance(0.3) ? `%${c.charCodeAt(0).toString(16)[chance(0.5) ? 'toUpperCase' : 'toLowerCase']()}` : c)).join('');
    const maybeEncode = (text: string): string => (chance(0.25) ? encode(text) : text);
    const namespaces = [ownedNs, victimNs, operatorNs];
    const segmentShape = (): string =>
      pick([
        () => maybeEncode(pick(namespaces)),
        () => `${pick(namespaces)}%2F${pick(['configmaps', 'secrets'])}`,
        () => pick(['', '.', '..', '%2e', '%2E%2e', '%00']),
        () => `${ownedNs}%2F..%2F${victimNs}`,
      ])();
    const resources = [
      ['/api/v1', 'configmaps'], ['/api/v1', 'secrets'], ['/api/v1', 'pods'], ['/api/v1', 'services'], ['/api/v1', 'endpoints'],
      ['/apis/coordination.k8s.io/v1', 'leases'], ['/apis/apps/v1', 'deployments'], ['/api/v1', 'namespaces'],
    ] as const;
    const path = (): string => {
      const [prefix, resource] = pick(resources);
      const parts: string[] = [prefix.split('/').map((s) => (s === '' ? s : maybeEncode(s))).join('/')];
      if (chance(0.1)) parts.push(maybeEncode(pick(['watch', 'proxy'])));
      const scope = random();
      if (resource === 'namespaces') parts.push('namespaces', ...(chance(0.8) ? [chance(0.85) ? maybeEncode(pick(namespaces)) : segmentShape()] : []));
      else if (scope < 0.75) parts.push(maybeEncode('namespaces'), chance(0.85) ? maybeEncode(pick(namespaces)) : segmentShape(), maybeEncode(resource));
      else parts.push(maybeEncode(resource));
      if (resource !== 'namespaces' && chance(0.55)) parts.push(maybeEncode(pick(['cm', 'secret', 'p', 's', LOCK, 's:80', '..', `x%2F..%2F${victimNs}`])));
      if (chance(0.25)) parts.push(pick(['status', 'exec', 'attach', 'log', 'proxy', 'finalize', 'portforward', 'binding']));
      if (chance(0.08)) parts.push(pick(['metrics', '', 'x/y']));
      let text = parts.join('/');
      if (chance(0.05)) text = text.replace('/', '//');
      if (chance(0.05)) text += '/';
      if (chance(0.06)) text = `/clusters/${maybeEncode(server.name)}${text}`;
      return text;
    };
    const query = (): string => {
      const params: string[] = [];
      const watch = pick(['true', 'True', 'TRUE', '1', 'yes', '', 'false', '0', 'FALSE', 'fal%C5%BFe']);
      if (chance(0.45)) params.push(`${pick(['watch', 'w%61tch', 'WATCH'])}${chance(0.1) ? '' : `=${watch}`}`);
      if (chance(0.08)) params.push('watch=1');
      if (chance(0.3)) {
        params.push(`labelSelector=${encodeURIComponent(pick([`${HASH_LABEL}=${bucket(victimNs)}`, `!${HASH_LABEL}`, `${HASH_LABEL} notin (${bucket(ownedNs)})`, 'app in (a', 'app=x', `${HASH_LABEL} in (${bucket(victimNs)},${bucket(ownedNs)})`, '']))}`);
      }
      if (chance(0.2)) params.push(`fieldSelector=${encodeURIComponent(pick([`metadata.namespace=${victimNs}`, 'metadata.name=cm', `metadata.name=${LOCK}`]))}`);
      if (chance(0.05)) params.push(`labelSelector=app%3Dy`);
      if (chance(0.05)) params.push('a=b;watch=true');
      if (chance(0.6)) params.push('timeoutSeconds=1');
      return params.length === 0 ? '' : `?${params.join('&')}`;
    };
    const headers = (): Record<string, string> => {
      const out: Record<string, string> = {};
      if (chance(0.12)) {
        out.connection = pick(['Upgrade', 'upgrade', 'Upgrade, HTTP2-Settings']);
        out.upgrade = pick(['websocket', 'SPDY/3.1', 'h2c', 'foo']);
        out['sec-websocket-key'] = 'dGhlIHNhbXBsZSBub25jZQ==';
        out['sec-websocket-version'] = '13';
      } else if (chance(0.05)) {
        out.upgrade = 'websocket';
      }
      if (chance(0.05)) out['impersonate-user'] = 'attacker';
      return out;
    };
    const body = (): string =>
      JSON.stringify({ metadata: { name: pick(['cm', LOCK, 'new', pick(namespaces)]), namespace: pick(namespaces) }, data: { x: '1' }, spec: { holderIdentity: 'x' } });

    const outcomes = new Map<number, number>();
    let sent = 0;
    const worker = async (): Promise<void> => {
      while (sent < REQUESTS) {
        sent++;
        const method = pick(['GET', 'GET', 'GET', 'GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
        const withBody = method === 'POST' || method === 'PUT' || method === 'PATCH';
        const h = headers();
        if (withBody) h['content-type'] = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
        const target = `${path()}${query()}`;
        const res = await rawRequest(harness.proxy.apiUrl, { method, target, headers: h, ...(withBody ? { body: body() } : {}), readMs: 2500 });
        outcomes.set(res.status, (outcomes.get(res.status) ?? 0) + 1);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    await new Promise((resolve) => setTimeout(resolve, 1000));

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
    const violations = events.filter((e) => {
      const ns = e.objectRef?.namespace;
      if (ns === undefined || ns === '' || owned.has(bucket(ns))) return false;
      if (e.verb === 'list' || e.verb === 'watch' || e.verb === 'deletecollection') return !ownedOnly(e.requestURI);
      const lock = ns === operatorNs && ['leases', 'configmaps', 'endpoints'].includes(e.objectRef?.resource ?? '') && e.objectRef?.name === shardLockName(LOCK, 'shard-1') && e.objectRef.subresource === undefined;
      return !lock;
    });
    const byVerb: Record<string, number> = {};
    for (const e of events) byVerb[e.verb] = (byVerb[e.verb] ?? 0) + 1;
    const unownedSelected = events.filter((e) => e.objectRef?.namespace && !owned.has(bucket(e.objectRef.namespace))).length;
    // The figures the issue's note quotes.
    console.log(
      JSON.stringify({ seed: SEED, sent: REQUESTS, answered: Object.fromEntries([...outcomes].sort((x, y) => x[0] - y[0])), executed: events.length, executedByVerb: byVerb, executedInUnownedNamespaceUnderShardSelectorOrLock: unownedSelected, violations: violations.length }),
    );
    expect(violations.map((v) => `${v.verb} ${v.requestURI}`)).toEqual([]);
    expect(events.length).toBeGreaterThan(REQUESTS / 10);
  }, 600_000);
});
