import { createSecureContext, type SecureContext } from 'node:tls';
import { buildConnector, Dispatcher, Pool } from 'undici';
import { CtrlmeshError, ErrorCodes } from '../../errors.js';
import type { ClusterRoute } from '../../transport/index.js';

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

type PemOptions = { ca: string | undefined; cert: string | undefined; key: string | undefined };
type UpstreamTls = ({ secureContext: SecureContext } | PemOptions) & { rejectUnauthorized: true };

/**
 * The cluster's one TLS context. PEM text that cannot make one (a bad CA or key) is passed as it is instead: each
 * connection then fails with Node's error, so only that cluster's requests fail (503), not the table's install.
 */
function upstreamTls(pem: PemOptions): UpstreamTls {
  try {
    return { secureContext: createSecureContext(pem), rejectUnauthorized: true };
  } catch {
    return { ...pem, rejectUnauthorized: true };
  }
}

/**
 * Connects with the cluster's TLS options, offering the last session ticket the API server gave. A resumed handshake
 * skips the certificate checks on both sides (and Node's detailed read of the server's chain for the host check, about
 * 0.5 ms a connection). undici's own cache holds sessions only weakly, so after a quiet while it has none, and none for
 * the connections opened together after a route change ended every watch. A ticket the server no longer takes costs a
 * full handshake, which brings the next one; only the server verified when the ticket was issued can take it.
 */
function resumingConnector(tls: UpstreamTls): buildConnector.connector {
  let connector = buildConnector(tls);
  return (options, callback) =>
    connector(options, (...args) => {
      args[1]?.once('session', (session: Buffer) => {
        connector = buildConnector({ ...tls, session });
      });
      callback(...args);
    });
}

/** The origin reply-from is given for a cluster; the dispatcher maps it to that cluster's own pool. */
function virtualOrigin(cluster: string): string {
  return `http://${encodeURIComponent(cluster)}.cluster.ctrlmesh.invalid`;
}

/**
 * One cluster's API server as the proxy reaches it: its own connection pool, TLS verified against the
 * cluster's CA (rejectUnauthorized stays on), the proxy's credentials for it, no body timeout (watches).
 */
export class ClusterUpstream {
  readonly name: string;
  readonly server: URL;
  readonly virtualBase: string;
  readonly authorization: string | undefined;
  readonly pool: Pool;
  /**
   * TLS options of every connection to the API server, the pool's and the upgrades'; undefined for plain http. One
   * context per cluster: without it Node builds one per connection from the PEM text (up to 1 ms of CPU and 30 KiB
   * held per connection, so per open watch), which a storm of watches opened at once pays 2,000 times.
   */
  readonly tls: UpstreamTls | undefined;
  /** Identity of what the pool was built from: an unchanged cluster keeps its pool across route tables. */
  readonly fingerprint: string;

  constructor(route: ClusterRoute, credentials: ClusterCredentials | undefined, options: UpstreamOptions) {
    this.name = route.name;
    this.server = new URL(route.server);
    this.virtualBase = virtualOrigin(route.name);
    this.authorization = credentials?.token === undefined ? undefined : `Bearer ${credentials.token}`;
    this.fingerprint = ClusterUpstream.fingerprint(route, credentials, options);
    this.tls =
      this.server.protocol === 'https:'
        ? upstreamTls({ ca: route.caPem === '' ? undefined : route.caPem, cert: credentials?.certPem, key: credentials?.keyPem })
        : undefined;
    this.pool = new Pool(this.server.origin, {
      // No cap: every watch holds an HTTP/1.1 connection of its own for as long as it runs. HTTP/2 would share
      // connections but measured more memory per open watch, and in a burst undici still opens a connection per
      // request while the first negotiates (docs/proxy.md, Figures).
      connections: null,
      headersTimeout: options.headersTimeoutMs,
      // Watches stream for as long as the API server keeps them open.
      bodyTimeout: 0,
      // Idle connections stay 60 s (undici's default is 4 s), so a GET after a pause pays no TLS handshake.
      keepAliveTimeout: 60_000,
      keepAliveMaxTimeout: 600_000,
      ...(this.tls ? { connect: resumingConnector(this.tls) } : {}),
    });
  }

  /** What a pool is built from; equal fingerprints can share one pool. */
  static fingerprint(route: ClusterRoute, credentials: ClusterCredentials | undefined, options: UpstreamOptions): string {
    return JSON.stringify([route.server, route.caPem, credentials ?? null, options]);
  }

  /** The path on the API server for a request path (a server URL may carry a path prefix). */
  upstreamPath(path: string): string {
    const prefix = this.server.pathname.replace(/\/$/, '');
    return `${prefix}${path}`;
  }
}

/**
 * The one dispatcher reply-from uses: it sends each request to the pool of the cluster named by its virtual
 * origin. The set of pools is replaced as a whole when a route table changes.
 */
export class ClusterDispatcher extends Dispatcher {
  private pools = new Map<string, Pool>();

  setUpstreams(upstreams: Iterable<ClusterUpstream>): void {
    this.pools = new Map([...upstreams].map((u) => [u.virtualBase, u.pool]));
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const origin = typeof options.origin === 'string' ? options.origin : options.origin?.origin;
    const pool = origin === undefined ? undefined : this.pools.get(origin);
    // request() turns a throw here into an error for that one request.
    if (pool === undefined) {
      // reply-from answers it as any transport failure (503, the message kept); the code marks it as the proxy's refusal.
      throw new CtrlmeshError(ErrorCodes.PROXY_REQUEST, `no upstream for ${String(origin)}: the cluster left the route table`);
    }
    return pool.dispatch(options, handler);
  }

  override async close(): Promise<void> {
    this.pools = new Map();
  }

  override async destroy(): Promise<void> {
    this.pools = new Map();
  }
}
