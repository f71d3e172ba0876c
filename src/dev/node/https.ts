import { request } from 'node:https';
import type { TlsClientIdentity } from '../probes.js';

export interface HttpsAnswer {
  status: number;
  body: string;
}

/**
 * GET over HTTPS, with a client certificate verified against the cluster CA, or without verifying the server at all
 * (`insecure`): kube-scheduler and kube-controller-manager serve /healthz with a certificate they sign themselves
 * at start, which no CA of ours can check, and /healthz is open to anonymous callers.
 */
export function httpsGet(url: string, options: { identity?: TlsClientIdentity; insecure?: boolean; timeoutMs?: number }): Promise<HttpsAnswer> {
  const timeoutMs = options.timeoutMs ?? 2000;
  const tls = options.identity ? { ca: options.identity.caPem, cert: options.identity.certPem, key: options.identity.keyPem } : {};
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET', ...tls, rejectUnauthorized: !options.insecure, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/** Whether a Node object (JSON) has the condition Ready=True. */
export function nodeIsReady(nodeJson: string): boolean {
  const node = JSON.parse(nodeJson) as { status?: { conditions?: { type?: string; status?: string }[] } };
  return (node.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}
