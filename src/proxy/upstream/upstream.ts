import type { Logger } from 'pino';
import { createSecureContext, type SecureContext } from 'node:tls';
import { buildConnector, Dispatcher, Pool } from 'undici';
import { CtrlmeshError, ErrorCodes } from '../../errors.js';
import type { ClusterRoute } from '../../transport/index.js';
import { Http2WatchPool, IDLE_CONNECTION_MS } from './http2-watches.js';
import { probeWatchProtocol } from './watch-protocol.js';

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
  const build = (session?: Buffer): buildConnector.connector => buildConnector({ ...tls, ...(session ? { session } : {}) });
  let connector = build();
  return (options, callback) =>
    connector(options, (err, socket) => {
      if (err !== null) return callback(err, null);
      socket.once('session', (session: Buffer) => {
        connector = build(session);
      });
      callback(null, socket);
    });
}

/** The origin reply-from is given for a cluster; the dispatcher maps it to that cluster's connections. */
function virtualOrigin(cluster: string): string {
  return `http://${encodeURIComponent(cluster)}.cluster.ctrlmesh.invalid`;
}

/** After an API server could not be asked for its protocol, watches wait this long before it is asked again. */
const PROBE_RETRY_MS = 10_000;

/**
 * One cluster's API server as the proxy reaches it: its own connection pools, TLS verified against the
 * cluster's CA (rejectUnauthorized stays on), the proxy's credentials for it, no body timeout (watches).
 *
 * Watches go as streams of a few HTTP/2 connections where the API server offers HTTP/2, as client-go's do: a route
 * change that ends every watch then costs the operator's re-watches no TLS handshake each, and an open watch holds no
 * connection of its own. Everything else stays on HTTP/1.1 keep-alive connections through reply-from: a short request
 * costs Node more CPU as an HTTP/2 stream (docs/proxy.md, Figures).
 */
export class ClusterUpstream {
  readonly name: string;
  readonly server: URL;
  readonly virtualBase: string;
  readonly authorization: string | undefined;
  /** HTTP/1.1 connections: every request that is not a watch, and watches until HTTP/2 is known to be offered. */
  readonly pool: Pool;
  /**
   * TLS options of every connection to the API server, the pools' and the upgrades'; undefined for plain http. One
   * context per cluster: without it Node builds one per connection from the PEM text (up to 1 ms of CPU and 30 KiB
   * held per connection, so per open watch), which a storm of watches opened at once pays 2,000 times.
   */
  readonly tls: UpstreamTls | undefined;
  /** Identity of what the pool was built from: an unchanged cluster keeps its pool across route tables. */
  readonly fingerprint: string;
  private readonly options: UpstreamOptions;
  private readonly logger: Logger;
  /** The HTTP/2 watches, once the API server said it offers HTTP/2. */
  private watches: Http2WatchPool | undefined;
  /** When to ask the API server for its protocol again (ms since the epoch); undefined while asking or once known. */
  private probeAgainAt: number | undefined;
  private closed = false;

  constructor(route: ClusterRoute, credentials: ClusterCredentials | undefined, options: UpstreamOptions, logger: Logger) {
    this.name = route.name;
    this.server = new URL(route.server);
    this.virtualBase = virtualOrigin(route.name);
    this.authorization = credentials?.token === undefined ? undefined : `Bearer ${credentials.token}`;
    this.fingerprint = ClusterUpstream.fingerprint(route, credentials, options);
    this.options = options;
    this.logger = logger;
    this.tls =
      this.server.protocol === 'https:'
        ? upstreamTls({ ca: route.caPem === '' ? undefined : route.caPem, cert: credentials?.certPem, key: credentials?.keyPem })
        : undefined;
    this.pool = new Pool(this.server.origin, {
      headersTimeout: options.headersTimeoutMs,
      // Watches stream for as long as the API server keeps them open.
      bodyTimeout: 0,
      // No cap: where watches go over HTTP/1.1, each holds a connection of its own for as long as it runs.
      connections: null,
      // Idle connections stay 60 s (undici's default is 4 s), so a request after a pause pays no TLS handshake.
      keepAliveTimeout: IDLE_CONNECTION_MS,
      keepAliveMaxTimeout: 600_000,
      ...(this.tls ? { connect: resumingConnector(this.tls) } : {}),
    });
    // Asked at once, so the watches after a table's install (and the storm after a route change) find HTTP/2 ready.
    if (this.tls) this.probe();
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

  /**
   * The HTTP/2 connections watches go on, once the API server said it offers HTTP/2; undefined until then (watches
   * go over HTTP/1.1 meanwhile), and the server is asked again when an earlier ask got no answer.
   */
  http2Watches(): Http2WatchPool | undefined {
    if (this.watches === undefined && this.probeAgainAt !== undefined && Date.now() >= this.probeAgainAt) this.probe();
    return this.watches;
  }

  /** Lets requests in flight finish, then closes every connection. */
  async close(): Promise<void> {
    this.closed = true;
    this.watches?.close();
    await this.pool.close();
  }

  /** Ends every connection now, watches included. */
  async destroy(): Promise<void> {
    this.closed = true;
    this.watches?.destroy();
    await this.pool.destroy();
  }

  private probe(): void {
    const tls = this.tls;
    if (tls === undefined) return;
    this.probeAgainAt = undefined;
    probeWatchProtocol(this.server, tls, this.options.headersTimeoutMs).then(
      (protocol) => {
        if (this.closed) return;
        if (protocol.kind === 'http/1.1') {
          this.logger.info({ cluster: this.name }, 'the API server offers no HTTP/2: watches go over HTTP/1.1');
          return;
        }
        this.logger.info({ cluster: this.name, streams: protocol.streams }, 'watches go over HTTP/2');
        this.watches = new Http2WatchPool(this.server, tls, protocol.streams, this.options.headersTimeoutMs, () => this.http2Withdrawn());
      },
      (err: unknown) => {
        if (this.closed) return;
        this.probeAgainAt = Date.now() + PROBE_RETRY_MS;
        this.logger.debug({ cluster: this.name, err }, 'could not ask the API server for HTTP/2; watches go over HTTP/1.1 for now');
      },
    );
  }

  /** A watch connection negotiated HTTP/1.1: watches go back to the HTTP/1.1 pool, and the server is asked again. */
  private http2Withdrawn(): void {
    const watches = this.watches;
    if (watches === undefined) return;
    this.watches = undefined;
    watches.close();
    this.probeAgainAt = Date.now();
    this.logger.warn({ cluster: this.name }, 'the API server stopped offering HTTP/2: watches go over HTTP/1.1');
  }
}

/**
 * The one dispatcher reply-from uses: it sends each request to the upstream of the cluster named by its virtual
 * origin. The set of upstreams is replaced as a whole when a route table changes.
 */
export class ClusterDispatcher extends Dispatcher {
  private upstreams = new Map<string, ClusterUpstream>();

  setUpstreams(upstreams: Iterable<ClusterUpstream>): void {
    this.upstreams = new Map([...upstreams].map((upstream) => [upstream.virtualBase, upstream]));
  }

  override dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    const origin = typeof options.origin === 'string' ? options.origin : options.origin?.origin;
    const target = origin === undefined ? undefined : this.upstreams.get(origin);
    // request() turns a throw here into an error for that one request.
    if (target === undefined) {
      // reply-from answers it as any transport failure (503, the message kept); the code marks it as the proxy's refusal.
      throw new CtrlmeshError(ErrorCodes.PROXY_REQUEST, `no upstream for ${String(origin)}: the cluster left the route table`);
    }
    return target.pool.dispatch(options, handler);
  }

  override async close(): Promise<void> {
    this.upstreams = new Map();
  }

  override async destroy(): Promise<void> {
    this.upstreams = new Map();
  }
}
