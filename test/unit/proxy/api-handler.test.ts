import replyFrom from '@fastify/reply-from';
import Fastify from 'fastify';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createProxyMetrics, type ProxyMetrics } from '../../../src/metrics/index.js';
import { createApiHandler } from '../../../src/proxy/request/entry/api-handler.js';
import { createUpgradeHandler } from '../../../src/proxy/request/entry/upgrade.js';
import { createWatchPath } from '../../../src/proxy/request/entry/watch-path.js';
import { statusFor } from '../../../src/proxy/request/judgement/status.js';
import { ClusterLinks } from '../../../src/proxy/upstream/cluster-links.js';
import { TableStore, type RequestGuard, type RouteSource, type RouteSourceHandlers } from '../../../src/proxy/index.js';
import { RouteController } from '../../../src/proxy/routes/route-controller.js';
import type { RouteTable } from '../../../src/transport/index.js';
import { clusterFixture, routeTableFixture } from './route-table-fixture.js';

const logger = pino({ level: 'silent' });
// KusionStack hash vectors: ns-a -> 15, ns-b -> 16, default -> 5.
const OWNED = 'ns-a';
const UNOWNED = 'ns-b';
const BREAKER_RETRY_AFTER = 7;
const LEASE_SECONDS = 10;

/** A route source driven by the test (what the NATS source reports, without NATS). */
class ScriptedSource implements RouteSource {
  readonly description = 'scripted source';
  readonly leased: boolean;
  handlers: RouteSourceHandlers | undefined;
  constructor(leased: boolean) {
    this.leased = leased;
  }
  async start(handlers: RouteSourceHandlers): Promise<void> {
    this.handlers = handlers;
  }
  async stop(): Promise<void> {}
}

/** A local port nothing listens on: the API server is down, so every forwarded request fails to connect. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** An answer as a client over a real connection receives it. */
interface Answer {
  statusCode: number;
  headers: Headers;
  body: string;
  json<T>(): T;
}

interface Harness {
  /** Sends one request to the proxy's listener (a real socket: a streamed body behaves as in production). */
  app: { inject(request: { method: string; url: string; payload?: string; headers?: Record<string, string> }): Promise<Answer> };
  /** Sends an exec upgrade for `path` over a fresh connection; resolves with all the proxy wrote back. */
  upgrade(path: string, method?: string): Promise<string>;
  source: ScriptedSource;
  controller: RouteController;
  metrics: ProxyMetrics;
  table: (version: number, overrides?: Partial<RouteTable>) => RouteTable;
}

describe('createApiHandler', () => {
  let dir: string;
  let now: number;
  let port: number;
  const cleanups: (() => Promise<void>)[] = [];

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-api-handler-'));
    now = 1_700_000_000_000;
    port = await closedPort();
    // The controller's lease check runs on an interval: the tests decide when it ticks.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
  });
  afterEach(async () => {
    vi.useRealTimers();
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    await rm(dir, { recursive: true, force: true });
  });

  async function harness(options: { leased?: boolean; guard?: RequestGuard; maxBodyBytes?: number; volumeThreshold?: number } = {}): Promise<Harness> {
    const source = new ScriptedSource(options.leased ?? false);
    const metrics = createProxyMetrics(new Registry());
    const links = new ClusterLinks({
      credentials: new Map(),
      upstream: { headersTimeoutMs: 2_000 },
      breaker: { errorThresholdPercentage: 50, volumeThreshold: options.volumeThreshold ?? 1_000, resetTimeoutMs: 60_000, rollingCountTimeoutMs: 60_000 },
      metrics,
      logger,
    });
    const controller = new RouteController({ source, store: new TableStore(join(dir, 'store.json')), links, metrics, logger, now: () => now, leaseClock: { monotonic: () => now, boot: 'boot-1' }, tickMs: 100 });
    await controller.start();
    // Every way in, as the proxy serves them: the watch path before fastify's route, and upgrades.
    const watchPath = createWatchPath({ controller, logger, headers: { allowImpersonation: false }, breakerRetryAfterSeconds: BREAKER_RETRY_AFTER, guard: options.guard });
    const app = Fastify({ serverFactory: (route) => createHttpServer((req, res) => watchPath(req, res, route)) });
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', (_request, payload, done) => done(null, payload));
    await app.register(replyFrom, { undici: links.dispatcher });
    const handler = createApiHandler({
      controller,
      logger,
      breakerRetryAfterSeconds: BREAKER_RETRY_AFTER,
      requests: { maxBodyBytes: options.maxBodyBytes ?? 4_096, allowImpersonation: false },
      ...(options.guard ? { guard: options.guard } : {}),
    });
    app.all('/*', handler);
    app.all('/', handler);
    app.server.on('upgrade', createUpgradeHandler({ controller, logger, headers: { allowImpersonation: false }, timeoutMs: 5_000, breakerRetryAfterSeconds: BREAKER_RETRY_AFTER, ...(options.guard ? { guard: options.guard } : {}) }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    const send: Harness['app']['inject'] = async ({ method, url, payload, headers }) => {
      const res = await fetch(`${base}${url}`, { method, headers: headers ?? {}, ...(payload === undefined ? {} : { body: payload }) });
      const body = await res.text();
      return { statusCode: res.status, headers: res.headers, body, json: <T>() => JSON.parse(body) as T };
    };
    cleanups.push(async () => {
      await controller.stop();
      await app.close();
      await links.close();
    });
    const table = (version: number, overrides: Partial<RouteTable> = {}): RouteTable =>
      routeTableFixture({
        version,
        leaseSeconds: LEASE_SECONDS,
        clusters: [
          clusterFixture('a', [15], { server: `https://127.0.0.1:${port}`, bucketOwners: { '16': 's2' } }),
          clusterFixture('b', [], { server: `https://127.0.0.1:${port}` }),
        ],
        ...overrides,
      });
    const upgrade = (path: string, method = 'POST'): Promise<string> =>
      new Promise((resolve) => {
        const socket = connect(Number(new URL(base).port), '127.0.0.1');
        const chunks: Buffer[] = [];
        socket.on('data', (chunk: Buffer) => chunks.push(chunk));
        socket.on('error', () => undefined);
        socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
        socket.on('connect', () => socket.write(`${method} ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n`));
      });
    return { app: { inject: send }, upgrade, source, controller, metrics, table };
  }

  const status = (res: Answer): { code: number; reason: string; message: string } =>
    res.json<{ code: number; reason: string; message: string }>();

  /** What the proxy answers when it forwarded the request and the (down) API server could not be reached. */
  function expectForwarded(res: Answer, cluster = 'a'): void {
    expect(res.statusCode).toBe(503);
    expect(status(res)).toMatchObject({ kind: 'Status', code: 503, reason: 'ServiceUnavailable' });
    expect(status(res).message).toContain(`cluster "${cluster}" API server unreachable`);
    expect(res.headers.get('retry-after')).toBe('1');
  }

  it('answers 503 with Retry-After before any route table arrived', async () => {
    const { app } = await harness();
    const res = await app.inject({ method: 'GET', url: `/api/v1/namespaces/${OWNED}/configmaps/x` });
    expect(res.statusCode).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(status(res)).toMatchObject({ code: 503, reason: 'ServiceUnavailable' });
    expect(status(res).message).toContain('no route table yet');
  });

  it('answers with the parser\'s refusal, as a Kubernetes Status, for requests it cannot judge', async () => {
    const { app, source, table } = await harness();
    source.handlers!.onTable(table(2));
    const bad = await app.inject({ method: 'GET', url: '/api/v1/nodes/n1/proxy/pods' });
    expect(bad.statusCode).toBe(403);
    expect(status(bad)).toMatchObject({ kind: 'Status', code: 403 });
    expect((await app.inject({ method: 'POST', url: '/version' })).statusCode).toBe(405);
    const ambiguous = await app.inject({ method: 'GET', url: '/api/v1/namespaces/ns/configmaps/cm?watch=1&fieldSelector=metadata.name%3Dother' });
    expect(ambiguous.statusCode).toBe(400);
  });

  it('answers 404 naming the shard for a cluster that is not in its table', async () => {
    const { app, source, table } = await harness();
    source.handlers!.onTable(table(2));
    const res = await app.inject({ method: 'GET', url: `/clusters/zz/api/v1/namespaces/${OWNED}/configmaps/x` });
    expect(res.statusCode).toBe(404);
    expect(status(res)).toMatchObject({ code: 404, reason: 'NotFound' });
    expect(status(res).message).toBe('cluster "zz" is not in the route table of shard "s1"');
  });

  it('forwards requests on owned namespaces and refuses unowned ones without reaching the API server', async () => {
    const { app, source, table, metrics } = await harness();
    source.handlers!.onTable(table(2));
    expectForwarded(await app.inject({ method: 'GET', url: `/api/v1/namespaces/${OWNED}/configmaps/x` }));
    expectForwarded(await app.inject({ method: 'PUT', url: `/api/v1/namespaces/${OWNED}/configmaps/x`, payload: '{}', headers: { 'content-type': 'application/json' } }));
    // Lists and watches are forwarded whatever the namespace: the injected selector keeps them in the shard.
    expectForwarded(await app.inject({ method: 'GET', url: `/api/v1/namespaces/${UNOWNED}/configmaps` }));
    expectForwarded(await app.inject({ method: 'GET', url: '/api/v1/configmaps?watch=true' }));
    // Non-resource requests and unsharded cluster-scoped resources pass.
    expectForwarded(await app.inject({ method: 'GET', url: '/version' }));
    expectForwarded(await app.inject({ method: 'GET', url: '/api/v1/nodes/n1' }));

    const read = await app.inject({ method: 'GET', url: `/api/v1/namespaces/${UNOWNED}/configmaps/x` });
    expect(read.statusCode).toBe(404);
    expect(status(read)).toMatchObject({ code: 404, reason: 'NotFound', details: { name: 'x', kind: 'configmaps' } });
    expect(status(read).message).toContain('is not served by shard "s1"');
    const write = await app.inject({ method: 'DELETE', url: `/api/v1/namespaces/${UNOWNED}/configmaps/x` });
    expect(write.statusCode).toBe(403);
    expect(status(write).message).toContain('belongs to shard "s2", not to shard "s1"');

    const counted = (await metrics.requests.get()).values.map((v) => `${v.labels.verb} ${v.labels.resource} ${v.labels.code} ${v.value}`);
    expect(counted).toEqual(expect.arrayContaining(['get configmaps 404 1', 'delete configmaps 403 1', 'get configmaps 503 1']));
  });

  it('judges requests to another cluster by that cluster\'s buckets', async () => {
    const { app, source, table } = await harness();
    source.handlers!.onTable(table(2));
    // Cluster b grants no bucket: ns-a, owned in a, is not served in b.
    expect((await app.inject({ method: 'GET', url: `/clusters/b/api/v1/namespaces/${OWNED}/configmaps/x` })).statusCode).toBe(404);
    expectForwarded(await app.inject({ method: 'GET', url: `/clusters/b/api/v1/namespaces/${OWNED}/configmaps` }), 'b');
  });

  it('judges a Namespace create by the name in its JSON body, and refuses one it cannot read', async () => {
    const { app, source, table } = await harness();
    source.handlers!.onTable(table(2));
    const create = (payload: string, contentType = 'application/json') =>
      app.inject({ method: 'POST', url: '/api/v1/namespaces', payload, headers: { 'content-type': contentType } });
    expectForwarded(await create(JSON.stringify({ metadata: { name: OWNED } })));
    expect((await create(JSON.stringify({ metadata: { name: UNOWNED } }))).statusCode).toBe(403);
    // A second namespace in the body (what the API server would record) or no name at all: cannot be judged.
    expect((await create(JSON.stringify({ metadata: { name: OWNED, namespace: UNOWNED } }))).statusCode).toBe(403);
    expect((await create(JSON.stringify({ metadata: {} }))).statusCode).toBe(403);
    expect((await create('{not json')).statusCode).toBe(403);
    const yaml = await create(`metadata:\n  name: ${OWNED}\n`, 'application/yaml');
    expect(yaml.statusCode).toBe(415);
    expect(status(yaml).message).toContain('must be sent as JSON');
  });

  it('answers 413 and closes the connection for a body it must read that is larger than allowed', async () => {
    const { app, source, table } = await harness({ maxBodyBytes: 64 });
    source.handlers!.onTable(table(2));
    const res = await app.inject({
      method: 'POST',
      url: '/api/v1/namespaces',
      payload: JSON.stringify({ metadata: { name: OWNED, annotations: { pad: 'x'.repeat(200) } } }),
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(413);
    expect(res.headers.get('connection')).toBe('close');
  });

  it('answers 400 for a client labelSelector it cannot parse on a sharded list', async () => {
    const { app, source, table } = await harness();
    source.handlers!.onTable(table(2));
    const res = await app.inject({ method: 'GET', url: `/api/v1/namespaces/${OWNED}/configmaps?labelSelector=${encodeURIComponent('app in (a')}` });
    expect(res.statusCode).toBe(400);
    expect(status(res).message).toMatch(/^labelSelector: /u);
    expectForwarded(await app.inject({ method: 'GET', url: `/api/v1/namespaces/${OWNED}/configmaps?labelSelector=app%3Dx` }));
  });

  it('forwards the shard\'s own leader-election lock whatever bucket the operator\'s namespace is in', async () => {
    const { app, source, table } = await harness();
    // The operator runs in `op` (table.operator `op/demo`); the lock is its own, never judged by bucket.
    source.handlers!.onTable(table(2, { leaderElectionName: 'leader' }));
    expectForwarded(await app.inject({ method: 'GET', url: '/apis/coordination.k8s.io/v1/namespaces/op/leases/leader' }));
    expect((await app.inject({ method: 'GET', url: '/apis/coordination.k8s.io/v1/namespaces/op/leases/other' })).statusCode).toBe(404);
    expect((await app.inject({ method: 'GET', url: `/apis/coordination.k8s.io/v1/namespaces/${UNOWNED}/leases/leader` })).statusCode).toBe(404);
  });

  it('keeps forwarding the shard\'s own lock while fenced, and only it', async () => {
    const { app, source, table, controller } = await harness({ leased: true });
    source.handlers!.onRenewal(now);
    source.handlers!.onTable(table(2, { leaderElectionName: 'leader' }));
    now += LEASE_SECONDS * 1000 + 1;
    vi.advanceTimersByTime(1000);
    expect(controller.current?.fenced).toBe(true);
    // A lost election stops a controller-runtime operator: its renewals go on while nothing else is served.
    expectForwarded(await app.inject({ method: 'GET', url: '/apis/coordination.k8s.io/v1/namespaces/op/leases/leader' }));
    const other = await app.inject({ method: 'GET', url: '/apis/coordination.k8s.io/v1/namespaces/op/leases/other' });
    expect(other.statusCode).toBe(503);
    // Another body on a lock create is not the lock: judged as any create, so refused while fenced.
    const create = await app.inject({
      method: 'POST',
      url: '/apis/coordination.k8s.io/v1/namespaces/op/leases',
      payload: '{"metadata":{"name":"other"}}',
      headers: { 'content-type': 'application/json' },
    });
    expect(create.statusCode).toBe(503);
  });

  it('refuses with 503 a request judged by a table replaced before it was sent', async () => {
    let swap: (() => void) | undefined;
    const { app, source, table } = await harness({
      guard: {
        applies: () => true,
        judge: async () => {
          swap?.();
          return undefined;
        },
      },
    });
    source.handlers!.onTable(table(2));
    // The guard runs after the request's table was taken: a newer table arrives while the request is judged.
    swap = () => source.handlers!.onTable(table(3));
    const res = await app.inject({ method: 'GET', url: `/api/v1/namespaces/${OWNED}/configmaps/x` });
    expect(res.statusCode).toBe(503);
    expect(status(res).message).toContain('changed or its lease ended meanwhile');
    swap = undefined;
    expectForwarded(await app.inject({ method: 'GET', url: `/api/v1/namespaces/${OWNED}/configmaps/x` }));
  });

  it('answers 503 until the hub first extends its lease, then serves: an operator starting beside it never lists an empty shard', async () => {
    const { app, upgrade, source, table, controller } = await harness({ leased: true });
    source.handlers!.onTable(table(2));
    expect(controller.current?.fenced).toBe(true);
    // An exec as well: 503, not 404 as a shard that owns nothing.
    expect(await upgrade(`/api/v1/namespaces/${OWNED}/pods/p/exec?command=ls&stdout=true`)).toMatch(/^HTTP\/1\.1 503 [^]*waiting for the hub to extend its lease/u);
    for (const url of [`/api/v1/namespaces/${OWNED}/configmaps`, `/api/v1/configmaps?watch=true`, `/api/v1/namespaces/${OWNED}/configmaps/x`]) {
      const res = await app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(status(res).message).toContain('waiting for the hub to extend its lease');
    }
    source.handlers!.onRenewal(now);
    expect(controller.current?.fenced).toBe(false);
    expectForwarded(await app.inject({ method: 'GET', url: `/api/v1/namespaces/${OWNED}/configmaps` }));
  });

  it('stops sending the moment the lease runs out, before the fence timer notices, then answers 503', async () => {
    const { app, upgrade, source, table, controller } = await harness({ leased: true });
    source.handlers!.onRenewal(now);
    source.handlers!.onTable(table(2));
    const owned = `/api/v1/namespaces/${OWNED}/configmaps/x`;
    expectForwarded(await app.inject({ method: 'GET', url: owned }));
    expect(await upgrade(`/api/v1/namespaces/${OWNED}/pods/p/exec?command=ls&stdout=true`)).toMatch(/^HTTP\/1\.1 503 [^]*API server unreachable/u);

    now += LEASE_SECONDS * 1000 + 1;
    // The timer has not ticked: the table still says unfenced, yet nothing judged by it leaves.
    expect(controller.current?.fenced).toBe(false);
    const stale = await app.inject({ method: 'GET', url: owned });
    expect(stale.statusCode).toBe(503);
    expect(status(stale).message).toContain('lease ended meanwhile');
    // An exec is held to the clock as well: refused, where before this tick it was forwarded (and found the API server down).
    const exec = `/api/v1/namespaces/${OWNED}/pods/p/exec?command=ls&stdout=true`;
    expect(await upgrade(exec)).toMatch(/^HTTP\/1\.1 503 [^]*route table this request was judged by changed or its lease ended/u);

    vi.advanceTimersByTime(100);
    expect(controller.current?.fenced).toBe(true);
    // Fenced: the proxy cannot tell what its shard owns, so reads, lists, watches and writes are answered 503 with
    // Retry-After, never as an empty shard (an informer would take an empty list for every object deleted).
    for (const answer of [
      await app.inject({ method: 'GET', url: owned }),
      await app.inject({ method: 'PUT', url: owned, payload: '{}', headers: { 'content-type': 'application/json' } }),
      await app.inject({ method: 'GET', url: `/api/v1/namespaces/${OWNED}/configmaps` }),
      await app.inject({ method: 'GET', url: '/api/v1/configmaps?watch=true' }),
    ]) {
      expect(answer.statusCode).toBe(503);
      expect(answer.headers.get('retry-after')).toBe('1');
      expect(status(answer).message).toContain('fenced');
    }

    // A renewal asked for after the lease ran out unfences the same table.
    source.handlers!.onRenewal(now);
    expect(controller.current?.fenced).toBe(false);
    expectForwarded(await app.inject({ method: 'GET', url: owned }));
  });

  it('fails fast with the configured Retry-After once the cluster\'s breaker opens', async () => {
    const { app, source, table } = await harness({ volumeThreshold: 2 });
    source.handlers!.onTable(table(2));
    const url = `/api/v1/namespaces/${OWNED}/configmaps/x`;
    expectForwarded(await app.inject({ method: 'GET', url }));
    expectForwarded(await app.inject({ method: 'GET', url }));
    const open = await app.inject({ method: 'GET', url });
    expect(open.statusCode).toBe(503);
    expect(open.headers.get('retry-after')).toBe(String(BREAKER_RETRY_AFTER));
    expect(status(open).message).toBe('cluster "a" is failing: its circuit breaker is open');
    // Refusals are judged before the breaker: an unowned read is still a 404, not a 503.
    expect((await app.inject({ method: 'GET', url: `/api/v1/namespaces/${UNOWNED}/configmaps/x` })).statusCode).toBe(404);
  });

  it('lets a guard answer in place of the API server, for the cluster the request targets', async () => {
    const seen: string[] = [];
    const { app, source, table } = await harness({
      guard: {
        applies: () => true,
        judge: async ({ cluster, info }) => {
          seen.push(`${cluster} ${info.kind === 'resource' ? info.verb : 'nonresource'}`);
          if (info.kind !== 'resource' || info.verb !== 'delete') return undefined;
          return { status: statusFor(429, 'limited') };
        },
      },
    });
    source.handlers!.onTable(table(2));
    const limited = await app.inject({ method: 'DELETE', url: `/clusters/b/api/v1/namespaces/${UNOWNED}/configmaps/x` });
    expect(limited.statusCode).toBe(429);
    expectForwarded(await app.inject({ method: 'GET', url: `/api/v1/namespaces/${OWNED}/configmaps/x` }));
    expect(seen).toEqual(['b delete', 'a get']);
  });

  it('answers the same refused request alike on every way in: plain, the watch path and an upgrade', async () => {
    const limited = `/api/v1/namespaces/${OWNED}/pods/watch/exec?command=sh`;
    const { app, source, table, upgrade } = await harness({
      guard: {
        applies: () => true,
        judge: async ({ info }) => (info.kind === 'resource' && info.subresource === 'exec' ? { status: statusFor(429, 'exec limited'), retryAfterSeconds: 3 } : undefined),
      },
    });
    /** Each way's answer: status line, Retry-After and the Status body. */
    const answers = async (path: string): Promise<string[]> => {
      // A POST goes to fastify's route; a GET naming "watch" is judged by the watch path; an Upgrade by the upgrade path.
      const plain = await app.inject({ method: 'POST', url: path });
      const watch = await app.inject({ method: 'GET', url: path });
      const raw = await upgrade(path, 'GET');
      const [rawHead = '', rawBody = ''] = raw.split('\r\n\r\n');
      const rawStatus = JSON.parse(rawBody) as { code: number; message: string };
      return [
        `${plain.statusCode} ${plain.headers.get('retry-after')} ${status(plain).message}`,
        `${watch.statusCode} ${watch.headers.get('retry-after')} ${status(watch).message}`,
        `${rawStatus.code} ${/retry-after: (\d+)/iu.exec(rawHead)?.[1] ?? null} ${rawStatus.message}`,
      ];
    };
    const alike = async (path: string, expected: string): Promise<void> => {
      const got = await answers(path);
      expect(new Set(got).size, got.join('\n')).toBe(1);
      expect(got[0]).toMatch(expected);
    };
    await alike(limited, '503 1 the proxy has no route table yet');
    source.handlers!.onTable(table(2));
    await alike(`/clusters/nope${limited}`, 'cluster "nope" is not in the route table of shard');
    // A rule limiting pods/exec answers kubectl exec, whichever way it comes.
    await alike(limited, '429 3 exec limited');
  });
});
