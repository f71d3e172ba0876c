import { connect as connectHttp2, constants, type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders, type OutgoingHttpHeaders } from 'node:http2';
import { connect as connectTls, type ConnectionOptions, type TLSSocket } from 'node:tls';
import { CtrlmeshError, ErrorCodes, UpstreamTimeoutError } from '../../errors.js';
import { tlsEndpoint } from './watch-protocol.js';

/** An API server's answer to a watch sent as an HTTP/2 stream: its head, and the stream its events come on. */
export interface Http2Answer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  stream: ClientHttp2Stream;
}

interface Connection {
  session: ClientHttp2Session;
  /** Streams open or opening on it. */
  streams: number;
}

const ignore = (): void => undefined;

/** How long a connection to an API server stays open unused, HTTP/1.1 or HTTP/2: a storm's leave none behind. */
export const IDLE_CONNECTION_MS = 60_000;

/**
 * Watches to one API server as streams of as few HTTP/2 connections as its stream limit allows, on node:http2
 * itself: a watch goes to the first connection with a free stream, and a new connection is opened only when none has
 * one. Watches only: undici's HTTP/2 client and reply-from cost more than half of a watch's opening (docs/proxy.md,
 * Figures), and a watch needs none of what they add (bodies, retries, a pool of HTTP/1.1 connections).
 *
 * Every connection verifies the server against the cluster's CA (the TLS options are the cluster's) and offers the
 * last session ticket the server gave. One that negotiates HTTP/1.1 instead (the server stopped offering HTTP/2) is
 * closed unused and reported through `onHttp1`.
 */
export class Http2WatchPool {
  private readonly connections: Connection[] = [];
  private ticket: Buffer | undefined;

  constructor(
    private readonly server: URL,
    private readonly tls: ConnectionOptions,
    /** Streams a connection carries at most: the server's limit (every stream beyond it would wait unsent). */
    private readonly streams: number,
    private readonly headersTimeoutMs: number,
    private readonly onHttp1: () => void,
    private readonly idleCloseMs = IDLE_CONNECTION_MS,
  ) {}

  /**
   * Sends a request without a body (`headers` without pseudo-headers but `:method` and `:path`); resolves with the
   * response head, rejects when the connection or the stream fails first or no head came within the timeout.
   */
  request(headers: OutgoingHttpHeaders): Promise<Http2Answer> {
    const connection = this.connectionWithRoom();
    // Throws on a header HTTP/2 cannot carry: counted only once the stream exists.
    const stream = connection.session.request(headers, { endStream: true });
    connection.streams++;
    // Errors after the head are the reader's: until it listens, one must not throw.
    stream.on('error', ignore);
    stream.once('close', () => {
      if (--connection.streams === 0 && !connection.session.closed) connection.session.setTimeout(this.idleCloseMs);
    });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        stream.close(constants.NGHTTP2_CANCEL);
        reject(new UpstreamTimeoutError(this.headersTimeoutMs));
      }, this.headersTimeoutMs);
      const fail = (err: Error): void => {
        clearTimeout(timer);
        reject(err);
      };
      stream.once('error', fail);
      // Closed without a head or an error (the server reset the stream with NO_ERROR, the session went away).
      const closed = (): void => fail(new CtrlmeshError(ErrorCodes.PROXY_REQUEST, 'the API server closed the stream before answering'));
      stream.once('close', closed);
      stream.once('response', (head) => {
        clearTimeout(timer);
        stream.off('error', fail);
        stream.off('close', closed);
        resolve({ statusCode: Number(head[':status']), headers: head, stream });
      });
    });
  }

  /** Ends every connection, the streams on them included. */
  destroy(): void {
    for (const { session } of this.connections.splice(0)) session.destroy();
  }

  /** Lets the open streams run to their end, opening no new ones. */
  close(): void {
    for (const { session } of this.connections.splice(0)) session.close();
  }

  private connectionWithRoom(): Connection {
    for (let i = 0; i < this.connections.length; i++) {
      const connection = this.connections[i]!;
      // Closed: by us, or by the server's GOAWAY, after which it takes no new stream.
      if (connection.session.closed || connection.session.destroyed) {
        this.connections.splice(i--, 1);
        continue;
      }
      if (connection.streams < this.streams) return connection;
    }
    const session = connectHttp2(this.server.origin, { createConnection: () => this.connectTls() });
    // A failed connection fails its streams, each with the error; the session's own is not one more to report.
    session.on('error', ignore);
    // Judged once the session holds the socket: destroying the socket before that crashes Node (an assertion).
    session.once('connect', () => {
      if (session.alpnProtocol === 'h2') return;
      session.destroy(new CtrlmeshError(ErrorCodes.PROXY_REQUEST, 'the API server no longer offers HTTP/2'));
      this.onHttp1();
    });
    const connection = { session, streams: 0 };
    this.connections.push(connection);
    // Fires after that long without a frame, and again that long after its last stream ended; a connection whose
    // quiet watches still run stays.
    session.setTimeout(this.idleCloseMs);
    session.on('timeout', () => {
      if (connection.streams > 0) return;
      const at = this.connections.indexOf(connection);
      if (at >= 0) this.connections.splice(at, 1);
      session.close();
    });
    return connection;
  }

  private connectTls(): TLSSocket {
    const socket = connectTls({
      ...this.tls,
      ...tlsEndpoint(this.server),
      ALPNProtocols: ['h2', 'http/1.1'],
      ...(this.ticket ? { session: this.ticket } : {}),
    });
    socket.on('session', (ticket: Buffer) => {
      this.ticket = ticket;
    });
    return socket;
  }
}
