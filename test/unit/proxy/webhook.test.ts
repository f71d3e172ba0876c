import { createServer as createHttpsServer, type Server } from 'node:https';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createProxyMetrics, type ProxyMetrics } from '../../../src/metrics/index.js';
import { parseProxyConfig, PROXY_DEFAULTS, PROXY_WEBHOOK_DEFAULTS } from '../../../src/proxy/index.js';
import { RouteState } from '../../../src/proxy/routes/route-state.js';
import type { ClusterLink } from '../../../src/proxy/upstream/index.js';
import { duplicateKey, readAdmissionReview, WEBHOOK_MAX_BODY_BYTES } from '../../../src/proxy/webhook/admission-review.js';
import { webhookRoute } from '../../../src/proxy/webhook/webhook-route.js';
import { FORWARDED_HEADER, startWebhookServer, type WebhookServer } from '../../../src/proxy/webhook/webhook-server.js';
import { firstDnsName } from '../../../src/proxy/webhook/webhook-tls.js';
import { bucketOf, createHashSettings } from '../../../src/sharding/index.js';
import { createCertificateAuthority, issueCertificate, type IssuedCertificate } from '../../../src/tls/index.js';
import type { RouteTable } from '../../../src/transport/index.js';
import { clusterFixture, routeTableFixture, continueTokensFixture } from './route-table-fixture.js';

const logger = pino({ level: 'silent' });
const encode = (value: unknown): Uint8Array => new TextEncoder().encode(typeof value === 'string' ? value : JSON.stringify(value));
const review = (request: unknown, top: Record<string, unknown> = {}): Record<string, unknown> => ({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request, ...top });
const configMapRequest = (namespace: string | undefined, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  uid: 'u-1',
  kind: { group: '', version: 'v1', kind: 'ConfigMap' },
  ...(namespace === undefined ? {} : { namespace }),
  name: 'cm',
  ...extra,
});
const refusal = (body: unknown): string | undefined => {
  const reading = readAdmissionReview(encode(body));
  return reading.ok ? undefined : reading.message;
};

describe('readAdmissionReview', () => {
  it('reads the namespace of a namespaced object, the name of a Namespace, nothing for a cluster-scoped object', () => {
    expect(readAdmissionReview(encode(review(configMapRequest('team-a'))))).toEqual({ ok: true, review: { uid: 'u-1', namespace: 'team-a' } });
    const namespace = { uid: 'u-2', kind: { group: '', version: 'v1', kind: 'Namespace' }, name: 'team-b', namespace: '' };
    expect(readAdmissionReview(encode(review(namespace)))).toEqual({ ok: true, review: { uid: 'u-2', namespace: 'team-b' } });
    // A Namespace not named yet (generateName) and a cluster-scoped kind: no bucket, the local operator answers.
    expect(readAdmissionReview(encode(review({ ...namespace, name: '' })))).toEqual({ ok: true, review: { uid: 'u-2' } });
    const role = { uid: 'u-3', kind: { group: 'rbac.authorization.k8s.io', version: 'v1', kind: 'ClusterRole' }, name: 'r', namespace: '' };
    expect(readAdmissionReview(encode(review(role)))).toEqual({ ok: true, review: { uid: 'u-3' } });
    // Only the core group's Namespace is one: a custom kind of that name is judged by its namespace.
    const custom = { uid: 'u-4', kind: { group: 'example.com', version: 'v1', kind: 'Namespace' }, name: 'x', namespace: 'team-c' };
    expect(readAdmissionReview(encode(review(custom)))).toEqual({ ok: true, review: { uid: 'u-4', namespace: 'team-c' } });
  });

  it('refuses what it cannot read with certainty: not JSON, not UTF-8, not an object, another version or kind', () => {
    expect(refusal('{"apiVersion":')).toBe('the body is not JSON (UTF-8)');
    expect(readAdmissionReview(new Uint8Array([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]))).toEqual({ ok: false, message: 'the body is not JSON (UTF-8)' });
    expect(refusal('[]')).toBe('the body is not a JSON object');
    expect(refusal('null')).toBe('the body is not a JSON object');
    expect(refusal(review(configMapRequest('a'), { apiVersion: 'admission.k8s.io/v1beta1' }))).toMatch(/^expected an AdmissionReview of admission.k8s.io\/v1/);
    expect(refusal(review(configMapRequest('a'), { kind: 'ConversionReview' }))).toMatch(/not ConversionReview of admission.k8s.io\/v1$/);
  });

  it('refuses a review without a usable request', () => {
    expect(refusal({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' })).toBe('the review has no request');
    expect(refusal(review([configMapRequest('a')]))).toBe('the review has no request');
    expect(refusal(review(configMapRequest('a', { uid: '' })))).toBe('request.uid is not a non-empty string');
    expect(refusal(review(configMapRequest('a', { uid: 7 })))).toBe('request.uid is not a non-empty string');
    expect(refusal(review(configMapRequest('a', { kind: 'ConfigMap' })))).toBe('request.kind is not a group, version and kind');
    expect(refusal(review(configMapRequest('a', { kind: { kind: 'ConfigMap' } })))).toBe('request.kind is not a group, version and kind');
    expect(refusal(review(configMapRequest(undefined, { namespace: ['a'] })))).toBe('request.namespace is not a string');
    expect(refusal(review(configMapRequest('a', { name: { a: 1 } })))).toBe('request.name is not a string');
  });

  it('refuses a key twice in one object, wherever and however it is spelled: readers disagree on which one counts', () => {
    const text = JSON.stringify(review(configMapRequest('mine')));
    expect(refusal(text.replace('"namespace":"mine"', '"namespace":"mine","namespace":"theirs"'))).toBe('the review has the key "namespace" twice in one object');
    expect(refusal(text.replace('"namespace":"mine"', '"namespace":"mine","n\\u0061mespace":"theirs"'))).toBe('the review has the key "namespace" twice in one object');
    expect(refusal(text.replace('{"apiVersion"', '{"kind":"AdmissionReview","apiVersion"'))).toBe('the review has the key "kind" twice in one object');
    const nested = review(configMapRequest('a', { object: { data: { k: 'v' } } }));
    expect(refusal(JSON.stringify(nested).replace('"k":"v"', '"k":"v","k":"w"'))).toBe('the review has the key "k" twice in one object');
    // The same key in two objects, or a key's text as a value, is no duplicate.
    expect(refusal(review(configMapRequest('a', { object: { metadata: { namespace: 'a', name: 'namespace' } } })))).toBeUndefined();
  });

  it('finds no duplicate in any JSON a serializer writes (property), and finds one added to any object of it', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.dictionary(fc.string(), fc.jsonValue(), { minKeys: 1 }), (value, object) => {
        expect(duplicateKey(JSON.stringify(value))).toBeUndefined();
        const key = Object.keys(object)[0] as string;
        const doubled = `{${JSON.stringify(key)}:0,${JSON.stringify(object).slice(1)}`;
        expect(duplicateKey(`{"around":[${JSON.stringify(value)},${doubled}]}`)).toBe(key);
      }),
    );
  });

  it('refuses a review past the size limit', () => {
    const big = JSON.stringify(review(configMapRequest('a', { object: { data: { k: 'x'.repeat(WEBHOOK_MAX_BODY_BYTES) } } })));
    expect(refusal(big)).toBe(`the review is larger than ${WEBHOOK_MAX_BODY_BYTES} bytes`);
  });
});

const settings = createHashSettings({ algorithm: 'fnv', bucketCount: 32 });
/** Namespaces whose buckets differ, so each can be owned by another shard. */
const [MINE, THEIRS, DOWN, FLIGHT, IMPOSTOR, SILENT, HUGE] = (() => {
  const found: string[] = [];
  const used = new Set<number>();
  for (let i = 0; found.length < 7; i += 1) {
    const b = bucketOf(`ns-${i}`, settings);
    if (!used.has(b)) {
      used.add(b);
      found.push(`ns-${i}`);
    }
  }
  return found as [string, string, string, string, string, string, string];
})();
const bucket = (ns: string): number => bucketOf(ns, settings);

function webhookTable(overrides: Partial<RouteTable> = {}): RouteTable {
  return routeTableFixture({
    shard: 'a/self',
    hashAlgorithm: 'fnv',
    bucketCount: 32,
    clusters: [
      clusterFixture('a', [bucket(MINE)], {
        bucketOwners: {
          [bucket(THEIRS)]: 'a/other',
          [bucket(DOWN)]: 'a/down',
          [bucket(IMPOSTOR)]: 'a/impostor',
          [bucket(SILENT)]: 'a/silent',
          [bucket(HUGE)]: 'a/huge',
        },
      }),
    ],
    webhook: { port: 9443, endpoints: { 'a/self': ['10.0.0.1'], 'a/other': ['127.0.0.2'], 'a/down': [], 'a/impostor': ['127.0.0.3'], 'a/silent': ['127.0.0.5'], 'a/huge': ['127.0.0.6', '127.0.0.7'] } },
    ...overrides,
  });
}
const stateOf = (table: RouteTable, fenced = false): RouteState => new RouteState({ table, fenced, continueTokens: continueTokensFixture, link: () => ({}) as ClusterLink });
function routeOf(namespace: string | undefined, options: { table?: RouteTable; fenced?: boolean } = {}) {
  const state = stateOf(options.table ?? webhookTable(), options.fenced);
  return webhookRoute({ table: state.table, home: state.home?.view, fenced: state.fenced, namespace });
}

describe('webhookRoute', () => {
  it('answers its own buckets and cluster-scoped objects locally, and sends the others to their owner\'s pods', () => {
    expect(routeOf(MINE)).toEqual({ route: 'local', owner: 'a/self' });
    expect(routeOf(undefined)).toEqual({ route: 'local', owner: 'a/self' });
    expect(routeOf(THEIRS)).toEqual({ route: 'forwarded', owner: 'a/other', addresses: ['127.0.0.2'] });
  });

  it('answers nothing for a bucket in flight, an owner without a ready pod, a fenced proxy or no table', () => {
    expect(routeOf(FLIGHT)).toMatchObject({ route: 'unowned', owner: '', reason: expect.stringContaining('granted to no shard') });
    expect(routeOf(DOWN)).toMatchObject({ route: 'unowned', owner: 'a/down', reason: expect.stringContaining('has no ready pod') });
    expect(routeOf(MINE, { fenced: true })).toMatchObject({ route: 'unowned', reason: expect.stringContaining('fenced') });
    expect(webhookRoute({ table: undefined, home: undefined, fenced: false, namespace: MINE })).toMatchObject({ route: 'unowned', reason: 'no route table yet' });
    // A table without `webhook` (the operator's config lost spec.webhook): its own buckets still answer.
    expect(routeOf(THEIRS, { table: webhookTable({ webhook: undefined }) })).toMatchObject({ route: 'unowned', owner: 'a/other' });
    expect(routeOf(MINE, { table: webhookTable({ webhook: undefined }) })).toEqual({ route: 'local', owner: 'a/self' });
  });

});

describe('proxy options for the webhook', () => {
  const base = { ...PROXY_DEFAULTS, webhook: { ...PROXY_WEBHOOK_DEFAULTS, operatorPort: 9443, certDir: '/certs' } };
  it('refuses a listener on the webhook port, wildcard hosts included, and an operator port the proxy listens on', () => {
    expect(parseProxyConfig(base).ok).toBe(true);
    const clash = parseProxyConfig({ ...base, egress: { host: '127.0.0.1', port: 5445 } });
    expect(clash.ok ? [] : clash.problems).toEqual(['webhook-listen and egress-listen must not both be 0.0.0.0:5445']);
    const own = parseProxyConfig({ ...base, webhook: { ...base.webhook, operatorPort: 5441 } });
    expect(own.ok ? [] : own.problems).toEqual(["webhook-port 5441 is the proxy's own ops-listen port: the operator's webhook must listen on another"]);
  });
});

/** The hosts of the fake operators that received a review, in order. */
const reached: string[] = [];

/**
 * A fake operator's webhook: answers with who it is, the path and whether a proxy sent it; never when `silent`;
 * with more than a review may hold when `huge`.
 */
function fakeOperator(tls: IssuedCertificate, host: string, port: number, answer: 'normal' | 'silent' | 'huge' = 'normal'): Promise<Server> {
  const server = createHttpsServer({ cert: tls.certPem, key: tls.keyPem }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      reached.push(host);
      if (answer === 'silent') return;
      const body = JSON.parse(Buffer.concat(chunks).toString()) as { request: { uid: string } };
      res.writeHead(200, { 'content-type': 'application/json' });
      const padding = answer === 'huge' ? 'x'.repeat(WEBHOOK_MAX_BODY_BYTES) : '';
      res.end(JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: body.request.uid, allowed: true }, host, path: req.url, from: req.headers[FORWARDED_HEADER], padding }));
    });
  });
  return new Promise((resolve) => server.listen(port, host, () => resolve(server)));
}

describe('the webhook listener, over real TLS', () => {
  const DNS = 'hook.op.svc';
  let dir: string;
  let own: IssuedCertificate;
  let caPem: string;
  let port: number;
  const servers: Server[] = [];
  let metrics: ProxyMetrics;
  let registry: Registry;
  let webhook: WebhookServer;
  let state: RouteState;
  let client: Agent;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-webhook-'));
    const ca = await createCertificateAuthority({ commonName: 'webhook-ca' });
    caPem = ca.certPem;
    own = await issueCertificate({ ca, commonName: DNS, dnsNames: [DNS, 'other.name'], usage: 'server' });
    // The same name, another CA: what a stranger on a pod IP could present.
    const stranger = await issueCertificate({ ca: await createCertificateAuthority({ commonName: 'other-ca' }), commonName: DNS, dnsNames: [DNS], usage: 'server' });
    await writeFile(join(dir, 'tls.crt'), own.certPem);
    await writeFile(join(dir, 'tls.key'), own.keyPem);
    // The operator port: free on 127.0.0.1, and used on the other loopback addresses too.
    const probe = await fakeOperator(own, '127.0.0.1', 0);
    port = (probe.address() as { port: number }).port;
    servers.push(probe, await fakeOperator(own, '127.0.0.2', port), await fakeOperator(stranger, '127.0.0.3', port), await fakeOperator(own, '127.0.0.5', port, 'silent'));
    servers.push(await fakeOperator(own, '127.0.0.6', port, 'huge'), await fakeOperator(own, '127.0.0.7', port, 'huge'));
    registry = new Registry();
    metrics = createProxyMetrics(registry);
    state = stateOf(webhookTable());
    webhook = await startWebhookServer({
      listen: { host: '127.0.0.1', port: 0 },
      operatorPort: port,
      certDir: dir,
      timeoutMs: 500,
      state: () => state,
      metrics,
      logger,
      reloadMs: 100,
    });
    client = new Agent({ connect: { ca: caPem, servername: DNS } });
  });

  afterAll(async () => {
    await webhook?.close();
    await client?.close();
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
    await rm(dir, { recursive: true, force: true });
  });

  const post = async (body: unknown, path = '/validate?timeout=10s'): Promise<{ status: number; json: Record<string, unknown> }> => {
    const answer = await request(`${webhook.url}${path}`, { method: 'POST', dispatcher: client, headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
    return { status: answer.statusCode, json: (await answer.body.json()) as Record<string, unknown> };
  };
  const count = async (route: string, owner: string): Promise<number> =>
    (await registry.getSingleMetric('ctrlmesh_proxy_webhook_requests_total')?.get())?.values.find((v) => v.labels.route === route && v.labels.owner === owner)?.value ?? 0;

  it('serves with the certificate of certDir, names it by its first DNS name, and answers the own buckets locally', async () => {
    expect(firstDnsName(own.certPem)).toBe(DNS);
    expect(await webhook.listening).toBe(webhook.url);
    const { status, json } = await post(review(configMapRequest(MINE)));
    expect(status).toBe(200);
    expect(json).toMatchObject({ host: '127.0.0.1', path: '/validate?timeout=10s', from: 'a/self', response: { uid: 'u-1', allowed: true } });
    expect(await count('local', 'a/self')).toBe(1);
  });

  it("sends another shard's review to its pod, verified as the same certificate (no ca.crt: the certificate is the anchor)", async () => {
    const { status, json } = await post(review(configMapRequest(THEIRS)));
    expect(status).toBe(200);
    expect(json).toMatchObject({ host: '127.0.0.2', from: 'a/self' });
    expect(await count('forwarded', 'a/other')).toBe(1);
  });

  it('refuses a peer with another certificate, answers 503 for no owner, no answer or no pod, and says so in the metric', async () => {
    const impostor = await post(review(configMapRequest(IMPOSTOR)));
    expect(impostor.status).toBe(503);
    expect(impostor.json.message).toMatch(/shard a\/impostor did not answer the review \(127\.0\.0\.3: .*certificate/);
    expect(await count('failed', 'a/impostor')).toBe(1);
    const started = Date.now();
    const silent = await post(review(configMapRequest(SILENT)));
    expect(silent.status).toBe(503);
    expect(silent.json.message).toContain('no answer within 500 ms');
    expect(Date.now() - started).toBeLessThan(3_000);
    expect((await post(review(configMapRequest(DOWN)))).status).toBe(503);
    expect((await post(review(configMapRequest(FLIGHT)))).json).toMatchObject({ kind: 'Status', code: 503, reason: 'ServiceUnavailable' });
    expect([await count('unowned', 'a/down'), await count('unowned', ''), await count('failed', 'a/silent')]).toEqual([1, 1, 1]);
    const seconds = await registry.getSingleMetric('ctrlmesh_proxy_webhook_seconds')?.get();
    const values = (seconds?.values ?? []) as { labels: Record<string, string | number>; value: number; metricName?: string }[];
    expect(values.find((v) => v.labels.route === 'failed' && v.metricName?.endsWith('_count'))?.value).toBe(2);
  });

  it('refuses what is no AdmissionReview (400), another method (405) and an oversize body (413)', async () => {
    expect((await post(review(configMapRequest(MINE), { apiVersion: 'admission.k8s.io/v1beta1' }))).status).toBe(400);
    expect((await post('{"a":1,"a":2}')).status).toBe(400);
    const get = await request(`${webhook.url}/validate`, { dispatcher: client });
    expect(get.statusCode).toBe(405);
    await get.body.dump();
    const big = await request(`${webhook.url}/validate`, { method: 'POST', dispatcher: client, body: 'x'.repeat(WEBHOOK_MAX_BODY_BYTES + 1) }).catch((err: Error) => err);
    if (!(big instanceof Error)) {
      expect(big.statusCode).toBe(413);
      await big.body.dump();
    }
  });

  it("gives a caller's X-Ctrlmesh-Webhook-From no meaning: the review goes to its owner, a fenced proxy still answers 503", async () => {
    const forged = async (namespace: string): Promise<{ status: number; json: Record<string, unknown> }> => {
      const answer = await request(`${webhook.url}/validate`, {
        method: 'POST',
        dispatcher: client,
        headers: { 'content-type': 'application/json', [FORWARDED_HEADER]: 'a/other' },
        body: JSON.stringify(review(configMapRequest(namespace))),
      });
      return { status: answer.statusCode, json: (await answer.body.json()) as Record<string, unknown> };
    };
    expect((await forged(THEIRS)).json).toMatchObject({ host: '127.0.0.2' });
    const before = state;
    state = stateOf(webhookTable(), true);
    try {
      expect((await forged(MINE)).status).toBe(503);
    } finally {
      state = before;
    }
  });

  it('sends a review the owner answered to no second pod, even when the answer cannot be relayed', async () => {
    reached.length = 0;
    const { status, json } = await post(review(configMapRequest(HUGE)));
    expect(status).toBe(503);
    expect(json.message).toContain(`larger than ${WEBHOOK_MAX_BODY_BYTES} bytes`);
    expect(reached).toHaveLength(1);
  });

  it('refuses nesting past Go\'s depth before parsing, more bytes of reviews at once than it holds, and bodies held back', async () => {
    const deep = await post(`${'['.repeat(20_000)}${']'.repeat(20_000)}`);
    expect(deep.status).toBe(400);
    expect(deep.json.message).toContain('nests deeper than 10000 levels');
    const small = await startWebhookServer({ listen: { host: '127.0.0.1', port: 0 }, operatorPort: port, certDir: dir, timeoutMs: 500, state: () => state, metrics, logger, maxBytesHeld: 1000 });
    // A second caller, from another address.
    const elsewhere = new Agent({ localAddress: '127.0.0.9', connect: { ca: caPem, servername: DNS } });
    try {
      const send = async (namespace: string, size: number, from = client): Promise<number> => {
        const answer = await request(`${await small.listening}/validate`, {
          method: 'POST',
          dispatcher: from,
          body: JSON.stringify(review(configMapRequest(namespace, { object: { data: { pad: 'x'.repeat(size) } } }))),
        });
        await answer.body.dump();
        return answer.statusCode;
      };
      // The first is held while its owner stays silent (500 ms); a second from the same caller passes its half.
      const held = send(SILENT, 300);
      await new Promise((r) => setTimeout(r, 100));
      expect(await send(MINE, 300)).toBe(503);
      // Another caller is served meanwhile.
      expect(await send(MINE, 300, elsewhere)).toBe(200);
      expect(await held).toBe(503);
      // Given back once answered.
      expect(await send(MINE, 300)).toBe(200);
      // A body held back is dropped once the review's time is up, and what it held is given back.
      const url = new URL((await small.listening) as string);
      const stalled = connect({ host: url.hostname, port: Number(url.port), servername: DNS, ca: caPem });
      stalled.on('error', () => undefined);
      const closed = new Promise<void>((resolve) => stalled.once('close', () => resolve()));
      stalled.write(`POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 900\r\n\r\n${'{'.padEnd(450, ' ')}`);
      const started = Date.now();
      await closed;
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(await send(MINE, 300)).toBe(200);
    } finally {
      await elsewhere.close();
      await small.close();
    }
  });

  it('verifies against ca.crt when there is one, and serves a new certificate once its files change', async () => {
    const ca = await createCertificateAuthority({ commonName: 'rotated-ca' });
    const next = await issueCertificate({ ca, commonName: DNS, dnsNames: [DNS], usage: 'server' });
    await writeFile(join(dir, 'tls.key'), next.keyPem);
    await writeFile(join(dir, 'tls.crt'), next.certPem);
    await writeFile(join(dir, 'ca.crt'), ca.certPem);
    const served = async (): Promise<string> =>
      new Promise((resolve, reject) => {
        const url = new URL(webhook.url as string);
        // Unverified on purpose: this only reads which certificate is served; verification is judged below.
        const socket = connect({ host: url.hostname, port: Number(url.port), servername: DNS, rejectUnauthorized: false }, () => {
          resolve(socket.getPeerX509Certificate()?.fingerprint256 ?? '');
          socket.end();
        });
        socket.on('error', reject);
      });
    const { X509Certificate } = await import('node:crypto');
    const wanted = new X509Certificate(next.certPem).fingerprint256;
    for (let i = 0; i < 50 && (await served()) !== wanted; i += 1) await new Promise((r) => setTimeout(r, 100));
    expect(await served()).toBe(wanted);
    // The operators still serve the old certificate, which the new CA does not sign: refused.
    const rotated = new Agent({ connect: { ca: ca.certPem, servername: DNS } });
    const answer = await request(`${webhook.url}/validate`, { method: 'POST', dispatcher: rotated, body: JSON.stringify(review(configMapRequest(THEIRS))) });
    expect(answer.statusCode).toBe(503);
    await answer.body.dump();
    await rotated.close();
  });
});
