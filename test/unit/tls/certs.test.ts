import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { createServer, request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { createCertificateAuthority, issueCertificate } from '../../../src/tls/index.js';

describe('in-process certificates', () => {
  it('issues a serving and a client certificate that chain to the CA and carry SANs and groups', async () => {
    const ca = await createCertificateAuthority({ commonName: 'unit-ca' });
    const serving = await issueCertificate({ ca, commonName: 'server', usage: 'server', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] });
    const client = await issueCertificate({ ca, commonName: 'alice', organizations: ['system:masters'], usage: 'client' });

    const caCert = new X509Certificate(ca.certPem);
    const servingCert = new X509Certificate(serving.certPem);
    const clientCert = new X509Certificate(client.certPem);
    expect(caCert.ca).toBe(true);
    expect(servingCert.checkIssued(caCert) && servingCert.verify(caCert.publicKey)).toBe(true);
    expect(clientCert.verify(caCert.publicKey)).toBe(true);
    expect(servingCert.subjectAltName).toBe('DNS:localhost, IP Address:127.0.0.1');
    expect(clientCert.subject.split('\n')).toEqual(['CN=alice', 'O=system:masters']);
  });

  it('lets a TLS server and a client authenticate each other with them', async () => {
    const ca = await createCertificateAuthority({ commonName: 'unit-ca' });
    const serving = await issueCertificate({ ca, commonName: 'server', usage: 'server', ipAddresses: ['127.0.0.1'] });
    const client = await issueCertificate({ ca, commonName: 'bob', usage: 'client' });
    const server = createServer(
      { cert: serving.certPem, key: serving.keyPem, ca: ca.certPem, requestCert: true, rejectUnauthorized: true },
      (req, res) => res.end(`hello ${(req.socket as import('node:tls').TLSSocket).getPeerCertificate().subject.CN}`),
    );
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      const body = await new Promise<string>((resolve, reject) => {
        request({ host: '127.0.0.1', port, ca: ca.certPem, cert: client.certPem, key: client.keyPem }, (res) => {
          let text = '';
          res.on('data', (chunk: Buffer) => (text += chunk.toString()));
          res.on('end', () => resolve(text));
        })
          .on('error', reject)
          .end();
      });
      expect(body).toBe('hello bob');
    } finally {
      server.close();
    }
  });
});
