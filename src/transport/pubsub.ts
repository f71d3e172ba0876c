import { headers, type Msg, type MsgHdrs, type Subscription } from '@nats-io/transport-node';
import type { Static, TSchema } from '@sinclair/typebox';
import type { Logger } from 'pino';
import { CtrlmeshError, ErrorCodes } from '../errors.js';
import { LogThrottle } from '../runtime/index.js';
import { decodeMessage, encodeMessage, receiveMessage } from './codec.js';
import { PROOF_HEADER, proveMessage } from './message-proof.js';
import type { NatsLink } from './connection.js';
import type { MessageKind } from './messages.js';

export interface SubscribeOptions<S extends TSchema> {
  link: NatsLink;
  subject: string;
  kind: MessageKind<S>;
  logger: Logger;
  /** Receives validated messages only; a malformed one is logged and dropped. */
  handler: (message: Static<S>, msg: Msg) => void | Promise<void>;
  /** Queue group: one member of the group gets each message. */
  queue?: string;
  /**
   * Requests this subscriber answers: one whose reply subject is not a requester's inbox is dropped, logged, before
   * its handler runs (see `answer`).
   */
  requests?: boolean;
}

/**
 * The reply subjects nats.js makes: the requester's inbox prefix (`_INBOX`, or `_INBOX_<its public key>` for an
 * identity of this project, the only inbox its permissions let it read), a NUID, and a request's token.
 */
const INBOX_REPLY = /^_INBOX(?:_(U[A-Z2-7]{55}))?\.[0-9A-Za-z]{1,64}(?:\.[0-9A-Za-z]{1,64})?$/u;

/**
 * The public key a reply subject's inbox is named by ('' for the plain `_INBOX` of a server without identities), or
 * undefined when the subject is no inbox at all.
 */
export function replyInboxKey(reply: string | undefined): string | undefined {
  const match = reply === undefined ? null : INBOX_REPLY.exec(reply);
  return match ? (match[1] ?? '') : undefined;
}

/**
 * Answers a request, only on an inbox. NATS does not check a reply subject against the requester's permissions, and
 * the answer goes out under the responder's identity: a request naming `$KV.<bucket>.<key>` as its reply would have
 * the hub, which may write every bucket, write its answer there (test/unit/transport/reply-inbox.test.ts, 'sends
 * nothing on a subject that is no inbox'; test/integration/reply-injection.test.ts).
 */
export function answer(msg: Msg, data: Uint8Array): void {
  if (replyInboxKey(msg.reply) === undefined) throw new CtrlmeshError(ErrorCodes.NATS, `refused to answer on ${JSON.stringify(msg.reply)}: not a requester's inbox`);
  msg.respond(data);
}

/**
 * What peers send that is dropped or refused is logged at most once per cause and sender every DROP_LOG_INTERVAL_MS,
 * with the number held back since (`suppressed`): any peer the server lets publish could otherwise write the log as
 * fast as it sends. The sender is the subject, which the server's permissions tie to one identity (a cluster's
 * agent, a shard's proxy), so that one peer's flood hides no other's line; subjects every holder of an identity
 * shares (the bootstrap's) share a line. The keys are as many as the subjects peers may publish on.
 */
export const DROP_LOG_INTERVAL_MS = 10_000;
export const peerDrops = new LogThrottle(DROP_LOG_INTERVAL_MS, () => performance.now(), 4096);

/** Subscribes with validation on receipt. A handler that throws is logged; the subscription carries on. */
export function subscribeMessages<S extends TSchema>(options: SubscribeOptions<S>): Subscription {
  const { logger } = options;
  return options.link.nc.subscribe(options.subject, {
    ...(options.queue ? { queue: options.queue } : {}),
    callback: (err, msg) => {
      if (err) {
        logger.warn({ err, subject: options.subject }, 'subscription error');
        return;
      }
      if (options.requests === true && replyInboxKey(msg.reply) === undefined) {
        peerDrops.warn(logger, `reply ${msg.subject}`, { subject: msg.subject, reply: msg.reply?.slice(0, 200) }, "dropped a request whose reply subject is not a requester's inbox");
        return;
      }
      const decoded = decodeMessage(options.kind, msg.data);
      if (!decoded.ok) {
        peerDrops.warn(logger, `malformed ${msg.subject}`, { source: msg.subject, reason: decoded.reason }, 'dropped a malformed message');
        return;
      }
      const message = decoded.value;
      Promise.resolve()
        .then(() => options.handler(message, msg))
        .catch((error: unknown) => logger.error({ err: error, subject: msg.subject }, 'message handler failed'));
    },
  });
}

/** Publishes a validated message; with `proofKey` (an nkey seed), signed with it (PROOF_HEADER). */
export function publishMessage<S extends TSchema>(link: NatsLink, subject: string, kind: MessageKind<S>, value: Static<S>, proofKey?: Uint8Array): void {
  const data = encodeMessage(kind, value);
  link.nc.publish(subject, data, proofKey ? { headers: proofHeaders(proofKey, subject, data) } : {});
}

function proofHeaders(seed: Uint8Array, subject: string, data: Uint8Array): MsgHdrs {
  const h = headers();
  h.set(PROOF_HEADER, proveMessage(seed, subject, data, new Date()));
  return h;
}

export interface RequestOptions<Q extends TSchema, R extends TSchema> {
  link: NatsLink;
  subject: string;
  request: MessageKind<Q>;
  reply: MessageKind<R>;
  value: Static<Q>;
  /** An nkey seed that signs the request (PROOF_HEADER), at each attempt. */
  proofKey?: Uint8Array | undefined;
  timeoutMs: number;
  logger: Logger;
}

/** A request whose reply is validated; no responder, a timeout or a malformed reply is a CtrlmeshError (NATS). */
export async function requestMessage<Q extends TSchema, R extends TSchema>(options: RequestOptions<Q, R>): Promise<Static<R>> {
  let msg: Msg;
  try {
    const data = encodeMessage(options.request, options.value);
    msg = await options.link.nc.request(options.subject, data, {
      timeout: options.timeoutMs,
      ...(options.proofKey ? { headers: proofHeaders(options.proofKey, options.subject, data) } : {}),
    });
  } catch (err) {
    throw new CtrlmeshError(ErrorCodes.NATS, `no answer on ${options.subject}: ${(err as Error).message} (is the hub running?)`, {
      cause: err,
    });
  }
  const reply = receiveMessage(options.reply, msg.data, { logger: options.logger, source: options.subject });
  if (reply === undefined) throw new CtrlmeshError(ErrorCodes.NATS, `malformed ${options.reply.kind} on ${options.subject}`);
  return reply;
}

/** Answers a request with a validated reply, on its inbox only (`answer`). */
export function respondMessage<S extends TSchema>(msg: Msg, kind: MessageKind<S>, value: Static<S>): void {
  answer(msg, encodeMessage(kind, value));
}
