import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIPv6, type AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { Agent, request } from 'undici';
import type { ListenAddress } from '../../api/index.js';
import type { ProxyMetrics } from '../../metrics/index.js';
import { statusFor } from '../request/judgement/status.js';
import type { RouteState } from '../routes/route-state.js';
import { readAdmissionReview, WEBHOOK_MAX_BODY_BYTES } from './admission-review.js';
import { webhookRoute, type WebhookRoute } from './webhook-route.js';
import { readWebhookCertificate, sameCertificate, type WebhookCertificate } from './webhook-tls.js';

/**
 * Set on every review the proxy sends on, naming its shard, for the owner's operator to see. A proxy never receives
 * one (reviews go on to operators, never to proxies) and gives it no meaning: a caller setting it routes nothing.
 */
export const FORWARDED_HEADER = 'x-ctrlmesh-webhook-from';

/**
 * Bytes of reviews held at once over every connection: four of the largest, half of that for one caller's address.
 * Past it a review gets 503 at once.
 */
export const WEBHOOK_MAX_BYTES_HELD = 4 * WEBHOOK_MAX_BODY_BYTES;

type RouteLabel = WebhookRoute['route'] | 'failed';
const ROUTES: readonly RouteLabel[] = ['local', 'forwarded', 'unowned', 'failed'];

export interface WebhookServerOptions {
  listen: ListenAddress;
  /** The operator's webhook port: on 127.0.0.1 for this shard, on each pod IP for the others. */
  operatorPort: number;
  certDir: string;
  /** How long the owner has to answer, from the moment the review is read. */
  timeoutMs: number;
  /** The route state in force (RouteController.current). */
  state: () => RouteState | undefined;
  metrics: ProxyMetrics;
  logger: Logger;
  /** How often the certificate files are read again (default 2 s; the kubelet swaps a Secret's files atomically). */
  reloadMs?: number;
  maxBodyBytes?: number;
  /** Bytes of reviews held at once (default WEBHOOK_MAX_BYTES_HELD). */
  maxBytesHeld?: number;
}

export interface WebhookServer {
  /** https://host:port once the certificate could be read and the listener is up. */
  readonly url: string | undefined;
  /** Resolves with the URL when listening. */
  listening: Promise<string>;
  close(): Promise<void>;
}

/** The metric children of one route table, resolved once for it. */
class TableChildren {
  private readonly counters = new Map<string, { inc(): void }>();

  constructor(
    readonly state: RouteState | undefined,
    private readonly metrics: ProxyMetrics,
  ) {}

  count(route: RouteLabel, owner: string): void {
    const key = `${route}\u0000${owner}`;
    let child = this.counters.get(key);
    if (!child) {
      child = this.metrics.webhookRequests.labels({ route, owner });
      this.counters.set(key, child);
    }
    child.inc();
  }
}

class Refusal extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

/** An owner's answer that came but cannot be relayed: the review reached the owner, so it goes to no other pod. */
class UnusableAnswer extends Error {}

/**
 * The bytes of reviews held at once (bodies read, until answered), over all connections and per caller's address:
 * one address holds at most half, so a caller that holds bodies back cannot take it all.
 */
class HeldBytes {
  private held = 0;
  private readonly byPeer = new Map<string, number>();

  constructor(private readonly limit: number) {}

  /** Holds `bytes` more for `peer`, or refuses (503) when that would pass a limit. */
  take(peer: string, bytes: number): void {
    const own = this.byPeer.get(peer) ?? 0;
    if (this.held + bytes > this.limit || own + bytes > this.limit / 2) {
      throw new Refusal(503, `ctrlmesh proxy: more than ${this.limit} bytes of reviews are being answered (half of them for one caller); retry`);
    }
    this.held += bytes;
    this.byPeer.set(peer, own + bytes);
  }

  give(peer: string, bytes: number): void {
    this.held -= bytes;
    const own = (this.byPeer.get(peer) ?? 0) - bytes;
    if (own > 0) this.byPeer.set(peer, own);
    else this.byPeer.delete(peer);
  }
}

/** A Status body, as the API server reads a failed webhook call. */
function sendStatus(res: ServerResponse, code: number, message: string): void {
  const body = JSON.stringify(statusFor(code, message));
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...(code === 405 ? { allow: 'POST' } : {}) });
  res.end(body);
}

/**
 * The body, up to `limit` bytes (past it a Refusal(413)), each byte taken from `hold` as it comes, all of it within
 * `withinMs` (the API server sends a review at once, and an answer after that time would come too late).
 */
async function readBody(req: IncomingMessage, limit: number, withinMs: number, hold: (bytes: number) => void): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > limit) throw new Refusal(413, `the review is larger than ${limit} bytes`);
  const late = new Refusal(408, `the review was not sent whole within ${withinMs} ms`);
  const timer = setTimeout(() => req.destroy(late), withinMs);
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.byteLength;
      if (size > limit) throw new Refusal(413, `the review is larger than ${limit} bytes`);
      hold(chunk.byteLength);
      chunks.push(chunk);
    }
  } finally {
    clearTimeout(timer);
  }
  return Buffer.concat(chunks);
}

/** The operators' client: TLS verified against the webhook's CA (or its certificate) under its first DNS name. */
function operatorAgent(cert: WebhookCertificate): Agent {
  return new Agent({
    connect: {
      ca: cert.trustPem,
      rejectUnauthorized: true,
      ...(cert.serverName ? { servername: cert.serverName } : {}),
      ...(cert.selfAnchored ? { allowPartialTrustChain: true } : {}),
    },
    keepAliveTimeout: 30_000,
  });
}

const hostOf = (address: string): string => (isIPv6(address) ? `[${address}]` : address);

/**
 * The proxy's admission webhook listener: each AdmissionReview is read for the namespace that decides its owner
 * (readAdmissionReview) and sent, same path and bytes, to the operator of the shard owning that bucket of the home
 * cluster (webhookRoute): this pod's on 127.0.0.1, another's on its pod IP. The owner's answer is relayed as it
 * is; no owner, or none answering within the timeout, gets a 503 at once, so the API server applies the webhook's
 * failurePolicy. Serves once the certificate can be read (a missing one is waited for: an operator may write its
 * own after the proxy started), and reloads it when its files change. Rejects when the listener cannot bind.
 */
export async function startWebhookServer(options: WebhookServerOptions): Promise<WebhookServer> {
  const listener = new WebhookListener(options);
  try {
    await listener.reload();
  } catch (err) {
    await listener.close();
    throw err;
  }
  listener.startReloading(options.reloadMs ?? 2_000);
  return listener;
}

/** The listener, its certificate and the operators' client, reloaded together (startWebhookServer). */
class WebhookListener implements WebhookServer {
  readonly listening: Promise<string>;
  private readonly limit: number;
  private readonly durations: Map<RouteLabel, { observe(seconds: number): void }>;
  private readonly heldBytes: HeldBytes;
  private cert: WebhookCertificate | undefined;
  private agent: Agent | undefined;
  private server: Server | undefined;
  private address: string | undefined;
  private children: TableChildren;
  private closed = false;
  private resolveListening: (url: string) => void = () => undefined;
  private reloading = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: WebhookServerOptions) {
    this.limit = options.maxBodyBytes ?? WEBHOOK_MAX_BODY_BYTES;
    this.durations = new Map(ROUTES.map((r) => [r, options.metrics.webhookDuration.labels({ route: r })]));
    this.heldBytes = new HeldBytes(options.maxBytesHeld ?? WEBHOOK_MAX_BYTES_HELD);
    this.children = new TableChildren(undefined, options.metrics);
    this.listening = new Promise<string>((resolve) => {
      this.resolveListening = resolve;
    });
  }

  get url(): string | undefined {
    return this.address;
  }

  /** Reads the certificate files again every `ms`, one reading at a time. */
  startReloading(ms: number): void {
    this.timer = setInterval(() => {
      this.reloading = this.reloading.then(() => this.reload()).catch((err: unknown) => this.options.logger.error({ err }, 'webhook listener failed to start'));
    }, ms);
    this.timer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    await this.reloading;
    const server = this.server;
    if (server) {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    }
    await this.agent?.close();
  }

  private childrenFor(state: RouteState | undefined): TableChildren {
    if (this.children.state !== state) this.children = new TableChildren(state, this.options.metrics);
    return this.children;
  }

  /** Sends the review to one operator; resolves with its answer, throws when it cannot be reached in time. */
  private async send(req: IncomingMessage, body: Buffer, address: string, signal: AbortSignal, self: string): Promise<{ status: number; type: string; body: Buffer }> {
    const { options, limit } = this;
    const answer = await request(`https://${hostOf(address)}:${options.operatorPort}${req.url ?? '/'}`, {
      method: 'POST',
      dispatcher: this.agent,
      headers: {
        'content-type': req.headers['content-type'] ?? 'application/json',
        accept: req.headers.accept ?? 'application/json',
        [FORWARDED_HEADER]: self,
      },
      body,
      signal,
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
    });
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of answer.body as AsyncIterable<Buffer>) {
        size += chunk.byteLength;
        if (size > limit) throw new Error(`the answer is larger than ${limit} bytes`);
        chunks.push(chunk);
      }
    } catch (err) {
      answer.body.destroy();
      throw new UnusableAnswer((err as Error).message, { cause: err });
    }
    const type = answer.headers['content-type'];
    return { status: answer.statusCode, type: typeof type === 'string' ? type : 'application/json', body: Buffer.concat(chunks) };
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== 'POST') {
      req.resume();
      sendStatus(res, 405, 'an admission webhook answers POST only');
      return;
    }
    const peer = req.socket.remoteAddress ?? '';
    let held = 0;
    try {
      await this.serveReview(req, res, (bytes) => {
        this.heldBytes.take(peer, bytes);
        held += bytes;
      });
    } finally {
      this.heldBytes.give(peer, held);
    }
  }

  /** Reads one review, holding its bytes with `hold`, and answers it: locally, from its owner, or 503. */
  private async serveReview(req: IncomingMessage, res: ServerResponse, hold: (bytes: number) => void): Promise<void> {
    const { options } = this;
    const { logger } = options;
    let body: Buffer;
    try {
      body = await readBody(req, this.limit, options.timeoutMs, hold);
    } catch (err) {
      sendStatus(res, err instanceof Refusal ? err.code : 400, (err as Error).message);
      // What is left of an oversize body is not read: the connection goes.
      res.on('finish', () => req.destroy());
      return;
    }
    const started = performance.now();
    const reading = readAdmissionReview(body);
    if (!reading.ok) {
      logger.warn({ reason: reading.message, path: req.url }, 'admission review refused');
      sendStatus(res, 400, reading.message);
      return;
    }
    const state = options.state();
    const table = this.childrenFor(state);
    const route = webhookRoute({
      table: state?.table,
      home: state?.home?.view,
      fenced: state?.fenced ?? false,
      namespace: reading.review.namespace,
    });
    const finish = (label: RouteLabel, owner: string): void => {
      table.count(label, owner);
      this.durations.get(label)?.observe((performance.now() - started) / 1000);
    };
    if (route.route === 'unowned') {
      sendStatus(res, 503, `ctrlmesh proxy of ${state?.table.shard ?? '(no table)'}: no shard can answer for ${reading.review.namespace}: ${route.reason}`);
      finish('unowned', route.owner);
      logger.warn({ uid: reading.review.uid, namespace: reading.review.namespace, reason: route.reason }, 'admission review unowned: answered 503');
      return;
    }
    const addresses = route.route === 'local' ? ['127.0.0.1'] : route.addresses;
    const signal = AbortSignal.timeout(options.timeoutMs);
    // Another pod of the same shard when one gives no answer; the one to start with turns, to spread the load.
    const first = Math.floor(Math.random() * addresses.length);
    const errors: string[] = [];
    let answeredOnce = false;
    for (let i = 0; i < addresses.length && !signal.aborted && !answeredOnce; i += 1) {
      const address = addresses[(first + i) % addresses.length] as string;
      try {
        if (!this.agent) throw new Error('no webhook certificate yet');
        const answer = await this.send(req, body, address, signal, state?.table.shard ?? '');
        res.writeHead(answer.status, { 'content-type': answer.type, 'content-length': answer.body.byteLength });
        res.end(answer.body);
        finish(route.route, route.owner);
        return;
      } catch (err) {
        answeredOnce = err instanceof UnusableAnswer;
        errors.push(`${address}: ${signal.aborted ? `no answer within ${options.timeoutMs} ms` : (err as Error).message}`);
      }
    }
    sendStatus(res, 503, `ctrlmesh proxy: shard ${route.owner} did not answer the review (${errors.join('; ')})`);
    finish('failed', route.owner);
    logger.warn({ uid: reading.review.uid, namespace: reading.review.namespace, owner: route.owner, errors }, 'admission review failed: answered 503');
  }

  /** Reads the certificate: the first time starts the listener, a change swaps it and the operators' client. */
  async reload(): Promise<void> {
    const { options } = this;
    const { logger } = options;
    let next: WebhookCertificate;
    try {
      next = await readWebhookCertificate(options.certDir);
    } catch (err) {
      if (!this.cert) logger.warn({ err, certDir: options.certDir }, 'no webhook certificate yet; the webhook listener waits for it');
      else logger.warn({ err, certDir: options.certDir }, 'cannot read the webhook certificate again; serving the one read before');
      return;
    }
    if (sameCertificate(this.cert, next) || this.closed) return;
    const previous = this.agent;
    this.cert = next;
    this.agent = operatorAgent(next);
    void previous?.close();
    if (!next.serverName) logger.warn({ certDir: options.certDir }, 'the webhook certificate has no DNS name: operators are verified by their IP address');
    if (this.server) {
      this.server.setSecureContext({ cert: next.certPem, key: next.keyPem });
      logger.info({ certDir: options.certDir }, 'webhook certificate reloaded');
      return;
    }
    const listener = createServer({ cert: next.certPem, key: next.keyPem, minVersion: 'TLSv1.2' }, (req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        logger.error({ err }, 'admission review handling failed');
        sendStatus(res, 503, 'ctrlmesh proxy: internal error');
      });
    });
    listener.headersTimeout = 10_000;
    listener.requestTimeout = 60_000;
    this.server = listener;
    try {
      await new Promise<void>((resolve, reject) => {
        listener.once('error', reject);
        listener.listen({ host: options.listen.host, port: options.listen.port }, () => resolve());
      });
    } catch (err) {
      // Tried again with the next reading.
      this.server = undefined;
      this.cert = undefined;
      throw err;
    }
    const address = listener.address() as AddressInfo;
    this.address = `https://${hostOf(address.address)}:${address.port}`;
    logger.info({ url: this.address, operatorPort: options.operatorPort, certDir: options.certDir }, 'admission webhook listening: each review goes to the shard owning its namespace');
    this.resolveListening(this.address);
  }
}
