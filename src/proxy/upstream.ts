import { Pool } from 'undici';
import type { ClusterRoute } from '../transport/index.js';

/** What the proxy presents to one cluster's API server: a client certificate and key, or a bearer token. */
export interface ClusterCredentials {
  certPem?: string;
  keyPem?: string;
  token?: string;
}

export interface UpstreamOptions {
  /** Longest wait for an API server's response head; a longer wait counts against the cluster's breaker. */
  headersTimeoutMs: number;
}

/**
 * One cluster's API server as the proxy reaches it: its own connection pool, TLS verified against the
 * cluster's CA (rejectUnauthorized stays on), the proxy's credentials for it, no body timeout (watches).
 */
export class ClusterUpstream {
  readonly name: string;
  readonly server: URL;
  /** The server URL's path without its trailing slash, put before every request path (usually empty). */
  readonly pathPrefix: string;
  readonly authorization: string | undefined;
  readonly pool: Pool;
  /** TLS options for raw connections (upgrades); undefined for plain http. */
  readonly tls: { ca: string | undefined; cert: string | undefined; key: string | undefined; rejectUnauthorized: true } | undefined;
  /** Identity of what the pool was built from: an unchanged cluster keeps its pool across route tables. */
  readonly fingerprint: string;

  constructor(route: ClusterRoute, credentials: ClusterCredentials | undefined, options: UpstreamOptions) {
    this.name = route.name;
    this.server = new URL(route.server);
    this.pathPrefix = this.server.pathname.replace(/\/$/, '');
    this.authorization = credentials?.token === undefined ? undefined : `Bearer ${credentials.token}`;
    this.fingerprint = ClusterUpstream.fingerprint(route, credentials, options);
    this.tls =
      this.server.protocol === 'https:'
        ? { ca: route.caPem === '' ? undefined : route.caPem, cert: credentials?.certPem, key: credentials?.keyPem, rejectUnauthorized: true }
        : undefined;
    this.pool = new Pool(this.server.origin, {
      // No cap: every watch holds an HTTP/1.1 connection of its own for as long as it runs. HTTP/2 would share
      // connections but measured more memory per open watch (129 KiB against 99 KiB RSS, docs/proxy.md).
      connections: null,
      headersTimeout: options.headersTimeoutMs,
      // Watches stream for as long as the API server keeps them open.
      bodyTimeout: 0,
      // Idle connections stay open for the next GET instead of paying a new TLS handshake (undici's default
      // is 4 s); the API server still closes them first if it wants to, and undici then reconnects.
      keepAliveTimeout: 60_000,
      keepAliveMaxTimeout: 600_000,
      ...(this.tls ? { connect: this.tls } : {}),
    });
  }

  /** What a pool is built from; equal fingerprints can share one pool. */
  static fingerprint(route: ClusterRoute, credentials: ClusterCredentials | undefined, options: UpstreamOptions): string {
    return JSON.stringify([route.server, route.caPem, credentials ?? null, options]);
  }
}
