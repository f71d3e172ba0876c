import { request } from 'node:https';

export interface TlsClientIdentity {
  caPem: string;
  certPem: string;
  keyPem: string;
}

/** GET over HTTPS with a client certificate, verifying the server against `caPem`; resolves the status code. */
export function httpsStatus(url: string, identity: TlsClientIdentity, timeoutMs = 2000): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET', ca: identity.caPem, cert: identity.certPem, key: identity.keyPem, timeout: timeoutMs }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/** GET over plain HTTP; resolves whether the answer is 200 and, if given, the body satisfies `accept`. */
export async function httpOk(url: string, accept?: (body: string) => boolean, timeoutMs = 2000): Promise<boolean> {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  const body = await res.text();
  return res.status === 200 && (accept?.(body) ?? true);
}
