import { connect, type Authenticator, type NatsConnection, type Status } from '@nats-io/transport-node';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import type { Logger } from 'pino';
import { CtrlmeshError, ErrorCodes } from '../errors.js';
import { natsConfigWarnings, natsConnectionOptions, type NatsClientConfig } from './nats-config.js';

export type ConnectionState = 'connected' | 'disconnected' | 'closed';

/** A change of connection state, delivered as an event: trouble with NATS is reported, never thrown. */
export interface ConnectionEvent {
  state: ConnectionState;
  server?: string;
  /** Set on `connected` after a disconnection: subscribers resynchronise on it. */
  reconnected: boolean;
}

export interface NatsLink {
  nc: NatsConnection;
  js: JetStreamClient;
  state(): ConnectionState;
  /** Registers a listener for state changes; returns a function that removes it. */
  onEvent(listener: (event: ConnectionEvent) => void): () => void;
  /** Drains subscriptions and closes the connection. */
  close(): Promise<void>;
}

export interface ConnectOptions {
  config: NatsClientConfig;
  /** Client name shown by the NATS server (e.g. `ctrlmesh-hub`). */
  name: string;
  logger: Logger;
  /** Milliseconds between reconnection attempts (default 500). */
  reconnectWaitMs?: number;
  /**
   * In place of the config's credentials at every (re)connection, with the same inbox prefix: an identity whose JWT
   * is renewed while connected (the agent's) reconnects with the latest one. Refused authentication is then tried
   * again rather than closing the connection, as the next attempt may carry a renewed JWT.
   */
  authenticator?: Authenticator;
}

const CONNECT_PROGRESS_MS = 10_000;

/**
 * Connects to NATS and keeps reconnecting forever, including when the server is not up yet at start.
 * Connection trouble becomes a `ConnectionEvent` (and a log line) rather than an exception.
 */
export async function connectNats(options: ConnectOptions): Promise<NatsLink> {
  const { logger, config } = options;
  for (const warning of natsConfigWarnings(config)) logger.warn(warning);
  let nc: NatsConnection;
  // nats.js retries the first connection silently (a refused TLS handshake included): say that we are still waiting.
  const startedAt = Date.now();
  const waiting = setInterval(() => {
    logger.warn(
      { servers: config.servers, waitedSeconds: Math.round((Date.now() - startedAt) / 1000) },
      'still connecting to NATS: check the URL, that the server certificate names that host (and --nats-ca signed it), and the credentials',
    );
  }, CONNECT_PROGRESS_MS);
  try {
    nc = await connect({
      ...natsConnectionOptions(config),
      ...(options.authenticator ? { authenticator: options.authenticator, ignoreAuthErrorAbort: true } : {}),
      name: options.name,
      maxReconnectAttempts: -1,
      waitOnFirstConnect: true,
      reconnectTimeWait: options.reconnectWaitMs ?? 500,
      reconnectJitter: 100,
      // A server that accepts TCP but never answers (frozen) must not hold each attempt for nats.js's default 20 s.
      timeout: 5_000,
      pingInterval: 5_000,
      maxPingOut: 2,
      // nats.js otherwise captures two stack traces per request (every KV put, lease renewal) in case it fails:
      // about a tenth of the hub's CPU while it publishes tables. Our callers wrap request errors with context.
      noAsyncTraces: true,
    });
  } catch (err) {
    throw new CtrlmeshError(ErrorCodes.NATS, `cannot connect to NATS at ${config.servers.join(',')}: ${(err as Error).message}`, {
      cause: err,
    });
  } finally {
    clearInterval(waiting);
  }
  let state: ConnectionState = 'connected';
  const listeners = new Set<(event: ConnectionEvent) => void>();
  const emit = (event: ConnectionEvent): void => {
    state = event.state;
    for (const listener of listeners) {
      try {
        listener(event);
      } catch (err) {
        logger.error({ err }, 'a NATS connection listener failed');
      }
    }
  };
  logger.info({ server: nc.getServer() }, 'connected to NATS');
  void (async () => {
    for await (const s of nc.status() as AsyncIterable<Status>) {
      switch (s.type) {
        case 'disconnect':
          logger.warn({ server: s.server }, 'disconnected from NATS; reconnecting');
          emit({ state: 'disconnected', server: s.server, reconnected: false });
          break;
        case 'reconnect':
          logger.info({ server: s.server }, 'reconnected to NATS');
          emit({ state: 'connected', server: s.server, reconnected: true });
          break;
        case 'error':
          logger.warn({ err: s.error }, 'NATS reported an error');
          break;
        default:
          break;
      }
    }
  })();
  void nc.closed().then((err) => {
    if (err) logger.error({ err }, 'NATS connection closed with an error');
    emit({ state: 'closed', reconnected: false });
  });
  return {
    nc,
    js: jetstream(nc),
    state: () => state,
    onEvent(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      if (nc.isClosed()) return;
      try {
        await nc.drain();
      } catch {
        // Draining fails when the server is gone; closing is what matters then.
        await nc.close();
      }
    },
  };
}
