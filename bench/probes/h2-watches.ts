/**
 * Watches straight from node:http2 to a kube-apiserver, for the probes: one stream, and a storm of them spread over
 * connections of STREAMS_PER_CONNECTION streams (the API server's advertised limit, as the proxies send them).
 */
import { connect, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import type { ApiServerHandle } from '../../src/dev/index.js';

export const STREAMS_PER_CONNECTION = 100;

export function adminTls(server: ApiServerHandle): { ca: string; cert: string; key: string; rejectUnauthorized: true } {
  return { ca: server.caPem, cert: server.clientCertPem, key: server.clientKeyPem, rejectUnauthorized: true };
}

/** Opens one stream without a body; resolves with it once its response head came. */
export function openStream(session: ClientHttp2Session, path: string): Promise<ClientHttp2Stream> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':path': path }, { endStream: true });
    stream.once('error', reject);
    stream.once('response', () => resolve(stream));
  });
}

/** The resourceVersion of the default namespace's ConfigMaps now, to watch from. */
export async function configMapsVersion(server: ApiServerHandle): Promise<string> {
  const session = connect(server.server, adminTls(server));
  try {
    const stream = await openStream(session, '/api/v1/namespaces/default/configmaps?limit=1');
    let body = '';
    for await (const chunk of stream) body += String(chunk);
    return (JSON.parse(body) as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
  } finally {
    session.close();
  }
}

/**
 * Opens `count` watches of `path` at once on new connections (a watch every `perMs`-th of a millisecond when
 * paced); resolves once all have their heads, with a function that ends them all.
 */
export async function h2WatchStorm(server: ApiServerHandle, path: string, count: number, perMs?: number): Promise<() => void> {
  const sessions: ClientHttp2Session[] = [];
  await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      if (perMs !== undefined) await new Promise((resolve) => setTimeout(resolve, Math.floor(i / perMs)));
      const at = Math.floor(i / STREAMS_PER_CONNECTION);
      const session = (sessions[at] ??= connect(server.server, adminTls(server)).on('error', () => undefined));
      (await openStream(session, path)).resume();
    }),
  );
  return () => {
    for (const session of sessions) session.destroy();
  };
}
