import { connect as connectHttp2 } from 'node:http2';
import { isIP } from 'node:net';
import { connect as connectTls, type ConnectionOptions } from 'node:tls';
import { CtrlmeshError, ErrorCodes } from '../../errors.js';

/**
 * How an API server takes watches: as streams of shared HTTP/2 connections, at most `streams` on one connection, or
 * as HTTP/1.1 requests of a connection each.
 */
export type WatchProtocol = { kind: 'h2'; streams: number } | { kind: 'http/1.1' };

/**
 * Streams the proxy opens on one HTTP/2 connection at most: the API server's own default (kube-apiserver and Go's
 * http2 server advertise 250), so a server that advertises more still does not put thousands of watches on one
 * connection's window.
 */
export const MAX_STREAMS_PER_CONNECTION = 250;

/** Where a TLS connection to an API server goes, and the name it verifies (none for an address: Node checks IP SANs). */
export function tlsEndpoint(server: URL): { host: string; port: number; servername?: string } {
  const host = server.hostname.replace(/^\[(.*)\]$/, '$1');
  return { host, port: Number(server.port === '' ? 443 : server.port), ...(isIP(host) === 0 ? { servername: host } : {}) };
}

/**
 * Asks the API server once which protocol it speaks, offering both in ALPN, and for HTTP/2 the SETTINGS it
 * sends before any request (MAX_CONCURRENT_STREAMS). Rejects when the server cannot be reached or answers too slowly:
 * that says nothing about the protocol.
 */
export function probeWatchProtocol(server: URL, tls: ConnectionOptions, timeoutMs: number): Promise<WatchProtocol> {
  return new Promise((resolve, reject) => {
    const socket = connectTls({ ...tls, ...tlsEndpoint(server), ALPNProtocols: ['h2', 'http/1.1'] });
    const fail = (err: Error): void => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    const timer = setTimeout(() => fail(new CtrlmeshError(ErrorCodes.PROXY_REQUEST, `no answer from ${server.origin} within ${timeoutMs} ms`)), timeoutMs);
    socket.once('error', fail);
    socket.once('secureConnect', () => {
      if (socket.alpnProtocol !== 'h2') {
        // end(), not destroy(): the handshake's last flight is still to be sent (TLS 1.3), and the server would log
        // a failed handshake.
        socket.end();
        clearTimeout(timer);
        resolve({ kind: 'http/1.1' });
        return;
      }
      const session = connectHttp2(server.origin, { createConnection: () => socket });
      session.once('error', fail);
      session.once('remoteSettings', (settings) => {
        session.close();
        clearTimeout(timer);
        const advertised = settings.maxConcurrentStreams ?? MAX_STREAMS_PER_CONNECTION;
        resolve(advertised < 1 ? { kind: 'http/1.1' } : { kind: 'h2', streams: Math.min(advertised, MAX_STREAMS_PER_CONNECTION) });
      });
    });
  });
}
