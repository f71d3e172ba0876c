import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/dev/index.js';
import { clusterRoute, routeTable, settles } from './helpers/proxy.js';
import { cluster, testbed } from './helpers/testbed.js';

/** Writes `text` on a new connection to `port`, then resolves with what came back when the other side closed, or after `readMs`. */
function exchange(port: number, text: string, options: { readMs?: number; reset?: 'on-answer' | number } = {}): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    const done = (): void => resolve(got);
    socket.on('data', (chunk: Buffer) => {
      got += chunk.toString('latin1');
      if (options.reset === 'on-answer') socket.resetAndDestroy();
    });
    socket.on('close', done);
    socket.on('error', done);
    if (typeof options.reset === 'number') setTimeout(() => socket.resetAndDestroy(), options.reset);
    setTimeout(() => {
      socket.destroy();
      done();
    }, options.readMs ?? 2_000);
  });
}

/** CONNECT `authority`, then once the tunnel stands, one request through it; resolves with all that came back. */
function throughTunnel(port: number, authority: string, inner: string): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const socket = connect(port, '127.0.0.1', () => socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`));
    socket.on('data', (chunk: Buffer) => {
      const first = got === '';
      got += chunk.toString('latin1');
      if (first && got.startsWith('HTTP/1.1 200')) socket.write(inner);
    });
    const done = (): void => resolve(got);
    socket.on('close', done);
    socket.on('error', done);
    setTimeout(() => {
      socket.destroy();
      done();
    }, 2_000);
  });
}

const statusOf = (answer: string): number => Number(/^HTTP\/1\.1 (\d{3})/u.exec(answer)?.[1] ?? 0);

/**
 * The egress port of a real `ctrlmesh proxy` process (the operator's HTTP_PROXY), tried as an attacker would, each
 * case judged by what a destination server received and by the sidecar staying up: no malformed request or reset
 * connection may end the whole process, and no URL written another way may pass its rules.
 */
describe('the egress port, attacked', () => {
  let dir: string;
  let destination: Server;
  let up: number;
  let proxy: ChildProcess;
  let [egress, ops] = [0, 0];
  const received: { url: string; headers: IncomingHttpHeaders }[] = [];
  const reached = (path: string): number => received.filter((r) => r.url === path).length;
  const alive = async (): Promise<void> => {
    expect(proxy.exitCode).toBeNull();
    expect((await fetch(`http://127.0.0.1:${ops}/healthz`)).status).toBe(200);
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-egress-'));
    // Dual stack: reached as 127.0.0.1 and as ::1.
    destination = createServer((req, res) => {
      received.push({ url: req.url ?? '', headers: req.headers });
      req.resume();
      res.end('destination\n');
    });
    await new Promise<void>((resolve) => destination.listen(0, '::', resolve));
    up = (destination.address() as { port: number }).port;
    const rules = join(dir, 'rules.yaml');
    await writeFile(
      rules,
      `apiVersion: ctrlmesh.kusionstack.io/v1alpha1
kind: CircuitBreaker
metadata: { name: egress-attacks, namespace: operator-demo }
spec:
  rateLimitings:
  - name: pay
    restRules:
    - { url: 'http://127.0.0.1:${up}/pay*', method: GET }
    bucket: { burst: 1, interval: 1m, limit: 1 }
    triggerPolicy: LimiterOnly
  trafficInterceptRules:
  - name: no-admin
    interceptType: Blacklist
    contentType: Normal
    contents: ['http://127.0.0.1:${up}/admin*', 'https://localhost/*']
---
apiVersion: ctrlmesh.kusionstack.io/v1alpha1
kind: FaultInjection
metadata: { name: egress-attacks, namespace: operator-demo }
spec:
  httpFault:
  - name: slow-tunnels
    delay: { fixedDelay: 1s, percent: "100" }
    match:
      httpMatch:
      - host: { exact: 127.0.0.2 }
        method: CONNECT
`,
    );
    const tablePath = join(dir, 'table.json');
    await writeFile(tablePath, JSON.stringify(routeTable({ shard: 'egress-0', homeCluster: cluster(0).name, clusters: [clusterRoute(cluster(0), [])] })));
    const api = await freePort();
    [egress, ops] = [await freePort(), await freePort()];
    proxy = spawn(
      process.execPath,
      [
        join('dist', 'src', 'cli', 'main.js'),
        'proxy',
        '--route-table', tablePath,
        '--credentials', testbed().kubeconfigPath,
        '--store', join(dir, 'store.json'),
        '--listen', `127.0.0.1:${api}`,
        '--ops-listen', `127.0.0.1:${ops}`,
        '--egress-listen', `127.0.0.1:${egress}`,
        '--rules', rules,
        '--log-level', 'warn',
      ],
      { stdio: 'ignore' },
    );
    await settles(alive, 20_000);
  }, 60_000);

  afterAll(async () => {
    proxy?.kill('SIGTERM');
    destination?.closeAllConnections();
    destination?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it.each([
    ['an https URL as a plain request', 'GET https://127.0.0.1:9/ HTTP/1.1\r\nHost: 127.0.0.1:9\r\nConnection: close\r\n\r\n'],
    ['a file URL', 'GET file:///etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'],
    ['a CONNECT to a port that is no number', 'CONNECT 127.0.0.1:abc HTTP/1.1\r\nHost: 127.0.0.1:abc\r\n\r\n'],
    ['a CONNECT to a port past 65535', 'CONNECT 127.0.0.1:70000 HTTP/1.1\r\nHost: 127.0.0.1:70000\r\n\r\n'],
    ['a CONNECT with a path', 'CONNECT 127.0.0.1:80/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'],
  ])('%s gets 400, and the sidecar stays up', async (_name, request) => {
    expect(statusOf(await exchange(egress, request))).toBe(400);
    await alive();
  });

  it('clients that reset their CONNECT, while a fault delays it or once a rule refused it, end only their own call', async () => {
    await exchange(egress, `CONNECT 127.0.0.2:${up} HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n`, { reset: 200 });
    for (let i = 0; i < 3; i++) expect(await exchange(egress, `CONNECT localhost:${up} HTTP/1.1\r\nHost: localhost\r\n\r\n`, { reset: 'on-answer' })).toMatch(/^HTTP\/1\.1 403/u);
    await new Promise((r) => setTimeout(r, 1_500));
    await alive();
  });

  it('a rule is not passed by writing its URL another way: escapes, address forms, case', async () => {
    const get = (url: string): Promise<string> => exchange(egress, `GET ${url} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    for (const url of [`http://127.0.0.1:${up}/admin`, `http://127.0.0.1:${up}/%61dmin`, `http://127.1:${up}/admin`, `http://2130706433:${up}/admin`, `http://[::ffff:127.0.0.1]:${up}/admin`, `http://127.0.0.1.:${up}/ADMIN/../admin`]) {
      expect(statusOf(await get(url)), url).toBe(403);
    }
    expect(reached('/admin')).toBe(0);
    // The limit of one call a minute counts /pay however it is written.
    const pays = [];
    for (const path of ['/pay', '/%70ay', '/p%61y']) pays.push(statusOf(await get(`http://127.0.0.1:${up}${path}`)));
    expect(pays).toEqual([200, 429, 429]);
    expect(reached('/pay')).toBe(1);
    for (const host of ['LOCALHOST', 'LocalHost', 'localhost.']) {
      expect(statusOf(await exchange(egress, `CONNECT ${host}:${up} HTTP/1.1\r\nHost: ${host}\r\n\r\n`)), host).toBe(403);
    }
    // A name with an empty label has no single form (cluster DNS resolves `localhost..` as `localhost`): refused.
    expect(statusOf(await exchange(egress, `CONNECT localhost..:${up} HTTP/1.1\r\nHost: localhost\r\n\r\n`))).toBe(400);
    expect(statusOf(await get(`http://127.0.0.1..:${up}/admin`))).toBe(400);
    await alive();
  });

  it('what leaves is what was judged: the Host of the URL, no hop-by-hop header; IPv6 tunnels stand', async () => {
    const answer = await exchange(
      egress,
      `GET http://127.0.0.1:${up}/vhost HTTP/1.1\r\nHost: blocked.test\r\nConnection: close, X-Hop\r\nX-Hop: secret\r\nKeep-Alive: timeout=5\r\nTE: trailers\r\nX-Kept: yes\r\n\r\n`,
    );
    expect(statusOf(answer)).toBe(200);
    const seen = received.find((r) => r.url === '/vhost')!;
    expect(seen.headers.host).toBe(`127.0.0.1:${up}`);
    expect(seen.headers['x-kept']).toBe('yes');
    for (const name of ['x-hop', 'keep-alive', 'te']) expect(seen.headers[name], name).toBeUndefined();
    expect(await throughTunnel(egress, `[::1]:${up}`, `GET /over-ipv6 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)).toContain('destination');
    expect(reached('/over-ipv6')).toBe(1);
  });
});
