import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClusterUpstream } from '../../../src/proxy/upstream/upstream.js';
import { createCertificateAuthority, issueCertificate, type CertificateAuthority, type IssuedCertificate } from '../../../src/tls/index.js';

/** An HTTPS server that asks for a client certificate from `ca` and counts full and resumed handshakes. */
async function startServer(serving: IssuedCertificate, ca: CertificateAuthority): Promise<{ server: Server; url: string; handshakes: { full: number; resumed: number } }> {
  const handshakes = { full: 0, resumed: 0 };
  const server = createServer({ cert: serving.certPem, key: serving.keyPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: true }, (req, res) => {
    res.end((req.socket as TLSSocket).getPeerCertificate().subject?.CN ?? '');
  });
  server.on('secureConnection', (socket: TLSSocket) => {
    if (socket.isSessionReused()) handshakes.resumed++;
    else handshakes.full++;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`, handshakes };
}

describe('ClusterUpstream connections', () => {
  let ca: CertificateAuthority;
  let client: IssuedCertificate;
  let serving: IssuedCertificate;
  const servers: Server[] = [];

  beforeAll(async () => {
    ca = await createCertificateAuthority({ commonName: 'cluster-ca' });
    client = await issueCertificate({ ca, commonName: 'ctrlmesh-proxy', usage: 'client' });
    serving = await issueCertificate({ ca, commonName: 'apiserver', ipAddresses: ['127.0.0.1'], usage: 'server' });
  });
  afterAll(() => {
    for (const server of servers) server.close();
  });

  const upstreamTo = (url: string, caPem: string): ClusterUpstream =>
    new ClusterUpstream({ name: 'a', server: url, caPem, buckets: [], limits: [] }, { certPem: client.certPem, keyPem: client.keyPem }, { headersTimeoutMs: 5_000 });
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
      expect(handshakes).toEqual({ full: 1, resumed: 20 });
    } finally {
      await upstream.pool.destroy();
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
      await upstream.pool.destroy();
    }
  });
});
