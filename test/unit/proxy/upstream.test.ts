import { createSecureServer, type Http2SecureServer } from 'node:http2';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { UpstreamTimeoutError } from '../../../src/errors.js';
import { Http2WatchPool } from '../../../src/proxy/upstream/http2-watches.js';
import { ClusterDispatcher, ClusterUpstream } from '../../../src/proxy/upstream/upstream.js';
import { createCertificateAuthority, issueCertificate, type CertificateAuthority, type IssuedCertificate } from '../../../src/tls/index.js';

/** An HTTPS server that asks for a client certificate from `ca` and counts full and resumed handshakes. */
async function startServer(serving: IssuedCertificate, ca: CertificateAuthority, port = 0): Promise<{ server: Server; url: string; handshakes: { full: number; resumed: number } }> {
  const handshakes = { full: 0, resumed: 0 };
  const server = createServer({ cert: serving.certPem, key: serving.keyPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: true }, (req, res) => {
    res.end((req.socket as TLSSocket).getPeerCertificate().subject?.CN ?? '');
  });
  server.on('secureConnection', (socket: TLSSocket) => {
    if (socket.isSessionReused()) handshakes.resumed++;
    else handshakes.full++;
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { server, url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, handshakes };
}

describe('ClusterUpstream connections', () => {
  let ca: CertificateAuthority;
  let client: IssuedCertificate;
  let serving: IssuedCertificate;
  const servers: (Server | Http2SecureServer)[] = [];

  beforeAll(async () => {
    ca = await createCertificateAuthority({ commonName: 'cluster-ca' });
    client = await issueCertificate({ ca, commonName: 'ctrlmesh-proxy', usage: 'client' });
    serving = await issueCertificate({ ca, commonName: 'apiserver', ipAddresses: ['127.0.0.1'], usage: 'server' });
  });
  afterAll(() => {
    for (const server of servers) server.close();
  });

  const upstreamTo = (url: string, caPem: string): ClusterUpstream =>
    new ClusterUpstream({ name: 'a', server: url, caPem, buckets: [], limits: [] }, { certPem: client.certPem, keyPem: client.keyPem }, { headersTimeoutMs: 5_000 }, pino({ level: 'silent' }));
  const burst = (upstream: ClusterUpstream, count: number): Promise<string[]> =>
    Promise.all(
      Array.from({ length: count }, async () => {
        // One connection each, as watches opened together take.
        const res = await upstream.pool.request({ method: 'GET', path: '/', headers: { connection: 'close' } });
        return res.body.text();
      }),
    );

  it('resumes the last TLS session for connections opened together, presenting the client certificate', async () => {
    const { server, url, handshakes } = await startServer(serving, ca);
    servers.push(server);
    const upstream = upstreamTo(url, ca.certPem);
    try {
      expect(await burst(upstream, 1)).toEqual(['ctrlmesh-proxy']);
      expect(await burst(upstream, 20)).toEqual(Array.from({ length: 20 }, () => 'ctrlmesh-proxy'));
      // One more full handshake: the upstream asked the server once which protocols it offers.
      expect(handshakes).toEqual({ full: 2, resumed: 20 });
    } finally {
      await upstream.destroy();
    }
  });

  it('refuses a server whose certificate the cluster CA did not issue', async () => {
    const other = await createCertificateAuthority({ commonName: 'other-ca' });
    const { server, url } = await startServer(await issueCertificate({ ca: other, commonName: 'impostor', ipAddresses: ['127.0.0.1'], usage: 'server' }), ca);
    servers.push(server);
    const upstream = upstreamTo(url, ca.certPem);
    try {
      await expect(burst(upstream, 1)).rejects.toThrow(/certificate/);
    } finally {
      await upstream.destroy();
    }
  });

  /**
   * An HTTP/2 server (HTTP/1.1 too, as kube-apiserver) that allows `streams` streams a connection, counts HTTP/2
   * connections, answers POSTs at once and holds GETs open as watches, recording each request's HTTP version.
   */
  async function startHttp2Server(
    streams: number,
    certificate: IssuedCertificate = serving,
    port = 0,
  ): Promise<{ url: string; connections: () => number; closed: () => number; versions: string[]; stop: () => Promise<void> }> {
    const versions: string[] = [];
    let connections = 0;
    let closed = 0;
    const server = createSecureServer(
      { cert: certificate.certPem, key: certificate.keyPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: true, allowHTTP1: true, settings: { maxConcurrentStreams: streams } },
      (req, res) => {
        versions.push(`${req.method} ${req.httpVersion}`);
        res.writeHead(200, { 'content-type': 'text/plain' });
        if (req.method === 'GET') res.write('watching\n');
        else res.end('written');
      },
    );
    const sockets: TLSSocket[] = [];
    server.on('secureConnection', (socket: TLSSocket) => sockets.push(socket));
    server.on('session', (session) => {
      connections++;
      session.once('close', () => closed++);
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    const stop = (): Promise<void> =>
      new Promise((resolve) => {
        server.close(() => resolve());
        for (const socket of sockets) socket.destroy();
      });
    return { url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, connections: () => connections, closed: () => closed, versions, stop };
  }

  /** Opens a GET that stays open (a watch) as an HTTP/2 stream, resolving once its first bytes arrived. */
  async function openWatch(upstream: ClusterUpstream): Promise<{ end: () => void }> {
    const watches = upstream.http2Watches();
    if (watches === undefined) throw new Error('no HTTP/2 watches');
    const { stream } = await watches.request({ ':method': 'GET', ':path': '/watch' });
    const first = await new Promise<string>((resolve) => stream.once('data', (chunk: Buffer) => resolve(chunk.toString())));
    expect(first).toBe('watching\n');
    return { end: () => stream.destroy() };
  }

  /** Watches go over HTTP/1.1 until the upstream has asked the server which protocols it offers. */
  async function untilHttp2(upstream: ClusterUpstream): Promise<void> {
    for (let i = 0; upstream.http2Watches() === undefined; i++) {
      expect(i).toBeLessThan(100);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  it('opens watches as streams of a few HTTP/2 connections and writes on HTTP/1.1 beside them', async () => {
    const { url, connections, versions } = await startHttp2Server(5);
    const upstream = upstreamTo(url, ca.certPem);
    const dispatcher = new ClusterDispatcher();
    dispatcher.setUpstreams([upstream]);
    try {
      await untilHttp2(upstream);
      const before = connections();
      const watches = await Promise.all(Array.from({ length: 12 }, () => openWatch(upstream)));
      // 12 watches at 5 streams a connection: 3 connections, not one each.
      expect(connections() - before).toBe(3);
      expect(versions.filter((v) => v === 'GET 2.0').length).toBe(12);
      // A write while every watch connection carries its limit is answered at once, over HTTP/1.1; so is a read.
      const write = await dispatcher.request({ origin: upstream.virtualBase, method: 'POST', path: '/write', body: '{}' });
      expect(await write.body.text()).toBe('written');
      expect(versions.at(-1)).toBe('POST 1.1');
      const read = await dispatcher.request({ origin: upstream.virtualBase, method: 'GET', path: '/object' });
      read.body.destroy();
      expect(versions.at(-1)).toBe('GET 1.1');
      // Streams that ended free their places: the next watches take no new connection.
      for (const watch of watches.splice(0, 5)) watch.end();
      await new Promise((resolve) => setTimeout(resolve, 50));
      watches.push(...(await Promise.all(Array.from({ length: 5 }, () => openWatch(upstream)))));
      expect(connections() - before).toBe(3);
      for (const watch of watches) watch.end();
    } finally {
      await upstream.destroy();
    }
  });

  it('takes no place on a connection for a request HTTP/2 cannot carry', async () => {
    const { url, connections } = await startHttp2Server(1);
    const upstream = upstreamTo(url, ca.certPem);
    try {
      await untilHttp2(upstream);
      const before = connections();
      // A connection-specific header: node:http2 throws before any stream exists, on the connection it opened.
      expect(() => upstream.http2Watches()!.request({ ':method': 'GET', ':path': '/watch', te: 'gzip' })).toThrow(/Connection specific/);
      // The one stream the server allows goes to the next watch, on that connection.
      const watch = await openWatch(upstream);
      expect(connections() - before).toBe(1);
      const second = await openWatch(upstream);
      expect(connections() - before).toBe(2);
      watch.end();
      second.end();
    } finally {
      await upstream.destroy();
    }
  });

  it('closes a connection once it carried no stream for its idle time, and keeps one whose quiet watch runs', async () => {
    const { url, connections, closed } = await startHttp2Server(2);
    const pool = new Http2WatchPool(new URL(url), { ca: ca.certPem, cert: client.certPem, key: client.keyPem, rejectUnauthorized: true }, 2, 5_000, () => undefined, 200);
    const watch = async (): Promise<{ end: () => void }> => {
      const { stream } = await pool.request({ ':method': 'GET', ':path': '/watch' });
      await new Promise((resolve) => stream.once('data', resolve));
      return { end: () => stream.destroy() };
    };
    try {
      const quiet = await watch();
      const others = await Promise.all([watch(), watch()]);
      expect(connections()).toBe(2);
      for (const other of others) other.end();
      // The connection whose streams ended goes after its idle time; the one with the quiet watch stays.
      await vi.waitFor(() => expect(closed()).toBe(1), { timeout: 3_000 });
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(closed()).toBe(1);
      // The quiet watch's connection takes the next watch: no new connection.
      (await watch()).end();
      expect(connections()).toBe(2);
      quiet.end();
      await vi.waitFor(() => expect(closed()).toBe(2), { timeout: 3_000 });
    } finally {
      pool.destroy();
    }
  });

  it('fails a watch whose head does not come in time, and one whose stream the server resets', async () => {
    const versions: string[] = [];
    const server = createSecureServer({ cert: serving.certPem, key: serving.keyPem, allowHTTP1: true }, (req) => {
      versions.push(req.url);
      // '/silent' is never answered; '/reset' is reset before a head.
      if (req.url === '/reset') req.stream.close(0x2);
    });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const upstream = new ClusterUpstream(
      { name: 'a', server: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, caPem: ca.certPem, buckets: [], limits: [] },
      undefined,
      { headersTimeoutMs: 300 },
      pino({ level: 'silent' }),
    );
    try {
      await untilHttp2(upstream);
      const watches = upstream.http2Watches()!;
      await expect(watches.request({ ':method': 'GET', ':path': '/silent' })).rejects.toBeInstanceOf(UpstreamTimeoutError);
      await expect(watches.request({ ':method': 'GET', ':path': '/reset' })).rejects.toThrow(/INTERNAL_ERROR|closed the stream/);
      expect(versions).toEqual(['/silent', '/reset']);
    } finally {
      await upstream.destroy();
    }
  });

  it('keeps watches on HTTP/1.1 where the server offers no HTTP/2', async () => {
    const { server, url } = await startServer(serving, ca);
    servers.push(server);
    const upstream = upstreamTo(url, ca.certPem);
    const dispatcher = new ClusterDispatcher();
    dispatcher.setUpstreams([upstream]);
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(upstream.http2Watches()).toBeUndefined();
      const res = await dispatcher.request({ origin: upstream.virtualBase, method: 'GET', path: '/' });
      expect(await res.body.text()).toBe('ctrlmesh-proxy');
    } finally {
      await upstream.destroy();
    }
  });

  it('returns watches to HTTP/1.1 when the server stops offering HTTP/2', async () => {
    const first = await startHttp2Server(5);
    const upstream = upstreamTo(first.url, ca.certPem);
    try {
      await untilHttp2(upstream);
      const watches = upstream.http2Watches()!;
      (await openWatch(upstream)).end();
      // The same address now serves HTTP/1.1 only, and the HTTP/2 connection is gone.
      await first.stop();
      const { server } = await startServer(serving, ca, Number(new URL(first.url).port));
      servers.push(server);
      // The watch that finds HTTP/1.1 on a new connection fails (the client retries, as after any 503), and watches
      // go back to HTTP/1.1: had HTTP/2 not been given up, every one would fail so.
      const failures: unknown[] = [];
      while (upstream.http2Watches() !== undefined) {
        // A watch on the old connection, not yet seen closed, fails too.
        failures.push(await watches.request({ ':method': 'GET', ':path': '/' }).catch((err: unknown) => err));
        expect(failures.length).toBeLessThan(3);
      }
      expect(failures.at(-1)).toBeInstanceOf(Error);
      expect(upstream.http2Watches()).toBeUndefined();
      const dispatcher = new ClusterDispatcher();
      dispatcher.setUpstreams([upstream]);
      const res = await dispatcher.request({ origin: upstream.virtualBase, method: 'GET', path: '/' });
      expect(await res.body.text()).toBe('ctrlmesh-proxy');
    } finally {
      await upstream.destroy();
    }
  });

  it('verifies the server certificate on the HTTP/2 watch connections too', async () => {
    const genuine = await startHttp2Server(5);
    const upstream = upstreamTo(genuine.url, ca.certPem);
    try {
      await untilHttp2(upstream);
      (await openWatch(upstream)).end();
      // An impostor takes the address: its certificate comes from a CA the cluster does not trust.
      await genuine.stop();
      const other = await createCertificateAuthority({ commonName: 'other-ca' });
      const impostor = await startHttp2Server(5, await issueCertificate({ ca: other, commonName: 'impostor', ipAddresses: ['127.0.0.1'], usage: 'server' }), Number(new URL(genuine.url).port));
      await expect(openWatch(upstream)).rejects.toThrow(/certificate/);
      expect(impostor.versions).toEqual([]);
    } finally {
      await upstream.destroy();
    }
  });
});
