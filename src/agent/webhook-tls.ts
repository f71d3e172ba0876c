import { isIP } from 'node:net';
import { createCertificateAuthority, issueCertificate } from '../tls/index.js';
import type { WebhookTls } from './webhook.js';

/**
 * A private CA and a serving certificate for the webhook's host, minted in memory at start: the CA goes into the
 * MutatingWebhookConfiguration's caBundle, so nothing has to be provisioned by hand and nothing is written to disk.
 */
export async function mintWebhookTls(host: string, now = new Date()): Promise<WebhookTls> {
  const ca = await createCertificateAuthority({ commonName: 'ctrlmesh-agent-webhook-ca', now });
  const serving = await issueCertificate({
    ca,
    commonName: host,
    usage: 'server',
    now,
    ...(isIP(host) ? { ipAddresses: [host] } : { dnsNames: [host] }),
  });
  return { certPem: serving.certPem, keyPem: serving.keyPem, caPem: ca.certPem };
}
