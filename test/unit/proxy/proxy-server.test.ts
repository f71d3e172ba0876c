import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { FileRouteSource, TableStore, parseProxyConfig, startProxy, type RunningProxy } from '../../../src/proxy/index.js';
import { emptyRules, type RuleSet, type RuleSource, type RuleSourceHandlers } from '../../../src/proxy/rules/index.js';
import { loadRules } from '../../../src/proxy/rule-files/rules-file.js';
import { routeTableFixture } from './route-table-fixture.js';

const logger = pino({ level: 'silent' });

/** Refuses plain-http calls to blocked.example and rate-limits pod deletes to none (ForceOpened). */
const RULES = `apiVersion: ctrlmesh.kusionstack.io/v1alpha1
kind: CircuitBreaker
metadata: { name: demo, namespace: operator-demo }
spec:
  selector: { matchLabels: { app: demo } }
  rateLimitings:
  - name: no-deletes
    resourceRules:
    - { apiGroups: [''], resources: [pods], verbs: [delete], namespaces: ['*'] }
    bucket: { burst: 1, interval: 1m, limit: 1 }
    triggerPolicy: ForceOpened
  trafficInterceptRules:
  - name: block
    interceptType: Blacklist
    contentType: Normal
    contents: ['http://blocked.example/*']
`;

/** A rule source the test drives: what FileRuleSource reports, without files. */
class ScriptedRules implements RuleSource {
  readonly description = 'scripted rules';
  handlers: RuleSourceHandlers | undefined;
  stopped = false;
  constructor(private readonly first: RuleSet) {}
  async start(handlers: RuleSourceHandlers): Promise<void> {
    this.handlers = handlers;
    handlers.onRules(this.first);
  }
  async stop(): Promise<void> {
    this.stopped = true;
  }
}

/** A request for `path` exactly as written (fetch would normalise it), and its answer. */
function rawRequest(base: string, method: string, path: string): Promise<{ statusCode: number; body: string }> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, method, path }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ statusCode: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Writes raw bytes to a new connection and resolves with everything read until the server closes it (or `waitMs`). */
function rawExchange(port: number, bytes: string, waitMs: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(), waitMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('latin1'));
    });
    socket.on('connect', () => socket.write(bytes));
  });
}

/** Sends one absolute-form request through the egress proxy; resolves with the status code. */
function viaEgress(egressUrl: string, target: string, method = 'GET'): Promise<number> {
  const proxy = new URL(egressUrl);
  return new Promise((resolve, reject) => {
    const req = request({ host: proxy.hostname, port: proxy.port, method, path: target, headers: { host: new URL(target).host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

describe('startProxy', () => {
  let dir: string;
  let proxy: RunningProxy | undefined;

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-proxy-server-'));
    await writeFile(join(dir, 'table.json'), JSON.stringify(routeTableFixture({ version: Date.now() - 1000 })));
  });

  afterEach(async () => {
    await proxy?.close();
    proxy = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  async function start(rules: RuleSource | undefined, egress: boolean): Promise<RunningProxy> {
    // Through the CLI's check: the proxy runs on the deeply frozen configuration it produces.
    const config = parseProxyConfig({
      api: { host: '127.0.0.1', port: 0 },
      ops: { host: '127.0.0.1', port: 0 },
      ...(egress ? { egress: { host: '127.0.0.1', port: 0 } } : {}),
      upstream: { headersTimeoutMs: 2_000 },
      breaker: { errorThresholdPercentage: 50, volumeThreshold: 1_000, resetTimeoutMs: 60_000, rollingCountTimeoutMs: 60_000 },
      requests: { maxBodyBytes: 4_096, allowImpersonation: false, readTimeoutMs: 1_000 },
      lease: { marginMs: 0 },
      meshSecret: 'ctrlmesh-proxy',
    });
    if (!config.ok) throw new Error(config.problems.join('; '));
    proxy = await startProxy({
      config: config.options,
      source: new FileRouteSource({ path: join(dir, 'table.json'), logger, pollIntervalMs: 50 }),
      store: new TableStore(join(dir, 'store.json')),
      credentials: new Map(),
      logger,
      now: Date.now,
      ...(rules ? { rules } : {}),
    });
    return proxy;
  }

  it('judges API calls and the egress port by the rules of its rule source, and follows the source', async () => {
    const source = new ScriptedRules(await loadRules([], Date.now()));
    const running = await start(source, true);
    expect(running.egressUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    // Rules arrive from the source after start: both paths judge by the newest set.
    const path = '/api/v1/namespaces/ns-a/pods/p';
    source.handlers!.onRules(await loadRulesText(dir, RULES));
    const deleted = await fetch(`${running.apiUrl}${path}`, { method: 'DELETE' });
    expect(deleted.status).toBe(417);
    expect(((await deleted.json()) as { reason: string }).reason).toBe('ExpectationFailed');
    expect(await viaEgress(running.egressUrl!, 'http://blocked.example/x')).toBe(403);
    const metrics = await (await fetch(`${running.opsUrl}/metrics`)).text();
    expect(metrics).toMatch(/ctrlmesh_proxy_intercepted_requests_total\{[^}]*rule="block"[^}]*\} 1/);
    expect(metrics).toMatch(/ctrlmesh_proxy_rate_limited_requests_total\{[^}]*rule="no-deletes"[^}]*\} 1/);
    await running.close();
    proxy = undefined;
    expect(source.stopped).toBe(true);
  });

  it('refuses a path it cannot decode, or a method the router does not know, with a Kubernetes Status', async () => {
    const running = await start(undefined, false);
    for (const path of ['/api/v1/namespaces/%zz/pods', '/api/v1/namespaces/ns-a/pods/%E0%A4%A', '/%']) {
      const answer = await rawRequest(running.apiUrl, 'GET', path);
      expect(answer.statusCode, path).toBe(400);
      expect(JSON.parse(answer.body), path).toMatchObject({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'BadRequest', code: 400 });
    }
    for (const method of ['PROPFIND', 'LOCK', 'MKCOL', 'PURGE', 'TRACE']) {
      const answer = await rawRequest(running.apiUrl, method, '/api/v1/namespaces/ns-a/pods');
      expect(answer.statusCode, method).toBe(405);
      expect(JSON.parse(answer.body), method).toMatchObject({ kind: 'Status', reason: 'MethodNotAllowed', code: 405 });
    }
  });

  it('answers what Node refuses before any route with a Status too, and cuts off a request never sent whole', async () => {
    const running = await start(undefined, false);
    const port = Number(new URL(running.apiUrl).port);
    const pods = '/api/v1/namespaces/ns-a/pods';
    const cases: [string, string, number, string][] = [
      ['a method in lower case', `get ${pods} HTTP/1.1\r\nHost: x\r\n\r\n`, 400, 'BadRequest'],
      ['a Content-Length that is not a number', `POST ${pods} HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}`, 400, 'BadRequest'],
      ['Content-Length beside chunked', `POST ${pods} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`, 400, 'BadRequest'],
      ['a head over Node\'s limit', `GET ${pods}/${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 431, 'BadRequest'],
      ['an Expect other than 100-continue', `GET /api/v1/namespaces/ns-b/pods/p HTTP/1.1\r\nHost: x\r\nConnection: close\r\nExpect: banana\r\n\r\n`, 417, 'ExpectationFailed'],
      ['CONNECT', 'CONNECT a.example:6443 HTTP/1.1\r\nHost: a.example:6443\r\n\r\n', 405, 'MethodNotAllowed'],
      // The proxy reads a Namespace create to judge it; one that never sends the rest of its body is not waited for.
      ['a body never finished', 'POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"metadata":', 408, 'Timeout'],
    ];
    for (const [what, bytes, code, reason] of cases) {
      const answer = await rawExchange(port, bytes, 10_000);
      expect(answer, what).toMatch(new RegExp(`^HTTP/1\\.1 ${code} `, 'u'));
      const body = answer.slice(answer.indexOf('\r\n\r\n') + 4);
      expect(JSON.parse(body), what).toMatchObject({ kind: 'Status', apiVersion: 'v1', status: 'Failure', code, reason });
    }
  }, 60_000);

  it('without a rule source: no egress unless asked, and an egress port that lets calls pass the rules', async () => {
    const running = await start(undefined, false);
    expect(running.egressUrl).toBeUndefined();
    await running.close();
    const withEgress = await start(undefined, true);
    // Nothing is refused: the call leaves (and fails to connect, 502), it is not judged away.
    expect(await viaEgress(withEgress.egressUrl!, 'http://127.0.0.1:1/x')).toBe(502);
    expect(emptyRules(0).circuit.empty).toBe(true);
  });

  it('fails to start when its rule source cannot, and stops the rule source when the rest cannot start', async () => {
    const failing: RuleSource = {
      description: 'failing rules',
      start: () => Promise.reject(new Error('unusable rules')),
      stop: async () => undefined,
    };
    await expect(start(failing, true)).rejects.toThrow('unusable rules');
    // No route table anywhere (no file, nothing stored): the proxy cannot start, and must not leave the rules polling.
    await rm(join(dir, 'table.json'));
    const rules = new ScriptedRules(await loadRules([], Date.now()));
    await expect(start(rules, true)).rejects.toMatchObject({ code: 'CM_FILE' });
    expect(rules.stopped).toBe(true);
    proxy = undefined;
  });
});

async function loadRulesText(dir: string, text: string): Promise<RuleSet> {
  const file = join(dir, 'rules.yaml');
  await writeFile(file, text);
  return loadRules([file], Date.now());
}
