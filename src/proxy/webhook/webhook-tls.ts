import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * The operator's webhook certificate as the proxy uses it, read from its certDir as controller-runtime writes it
 * (`tls.crt`, `tls.key`, optionally `ca.crt`): it serves with it, and since every shard mounts the same
 * certificate, it verifies the operator it sends a review to with it too.
 */
export interface WebhookCertificate {
  certPem: string;
  keyPem: string;
  /** The trust anchor for the operators: `ca.crt` when present, else the certificate itself. */
  trustPem: string;
  /** Whether the anchor is the certificate itself (a leaf: OpenSSL then needs a partial chain allowed). */
  selfAnchored: boolean;
  /** The name the operators are verified as: the certificate's first DNS subject alternative name. */
  serverName: string | undefined;
}

/** The first `DNS:` entry of a certificate's subjectAltName, or undefined. */
export function firstDnsName(certPem: string): string | undefined {
  const names = new X509Certificate(certPem).subjectAltName ?? '';
  // Node lists `DNS:a, DNS:b, IP Address:1.2.3.4`; a name with a comma or quote comes JSON-quoted ("DNS:a,b").
  for (const entry of names.split(', ')) {
    const value = entry.startsWith('"') ? (JSON.parse(entry) as string) : entry;
    if (value.startsWith('DNS:')) return value.slice(4);
  }
  return undefined;
}

async function readOptional(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The certificate of `dir`; throws when `tls.crt` or `tls.key` is missing or the certificate unreadable. */
export async function readWebhookCertificate(dir: string): Promise<WebhookCertificate> {
  const [certPem, keyPem, caPem] = await Promise.all([readFile(join(dir, 'tls.crt'), 'utf8'), readFile(join(dir, 'tls.key'), 'utf8'), readOptional(join(dir, 'ca.crt'))]);
  const selfAnchored = caPem === undefined || caPem.trim() === '';
  return { certPem, keyPem, trustPem: selfAnchored ? certPem : caPem, selfAnchored, serverName: firstDnsName(certPem) };
}

/** Whether two readings hold the same files. */
export function sameCertificate(a: WebhookCertificate | undefined, b: WebhookCertificate): boolean {
  return a !== undefined && a.certPem === b.certPem && a.keyPem === b.keyPem && a.trustPem === b.trustPem;
}
