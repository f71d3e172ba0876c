import type { Msg, Subscription } from '@nats-io/transport-node';
import type { Static, TSchema } from '@sinclair/typebox';
import type { Logger } from 'pino';
import { CtrlmeshError, ErrorCodes } from '../errors.js';
import { encodeMessage, receiveMessage } from './codec.js';
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
}

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
      const message = receiveMessage(options.kind, msg.data, { logger, source: msg.subject });
      if (message === undefined) return;
      Promise.resolve()
        .then(() => options.handler(message, msg))
        .catch((error: unknown) => logger.error({ err: error, subject: msg.subject }, 'message handler failed'));
    },
  });
}

export function publishMessage<S extends TSchema>(link: NatsLink, subject: string, kind: MessageKind<S>, value: Static<S>): void {
  link.nc.publish(subject, encodeMessage(kind, value));
}

export interface RequestOptions<Q extends TSchema, R extends TSchema> {
  link: NatsLink;
  subject: string;
  request: MessageKind<Q>;
  reply: MessageKind<R>;
  value: Static<Q>;
  timeoutMs: number;
  logger: Logger;
}

/** A request whose reply is validated; no responder, a timeout or a malformed reply is a CtrlmeshError (NATS). */
export async function requestMessage<Q extends TSchema, R extends TSchema>(options: RequestOptions<Q, R>): Promise<Static<R>> {
  let msg: Msg;
  try {
    msg = await options.link.nc.request(options.subject, encodeMessage(options.request, options.value), {
      timeout: options.timeoutMs,
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

/** Answers a request with a validated reply. */
export function respondMessage<S extends TSchema>(msg: Msg, kind: MessageKind<S>, value: Static<S>): void {
  msg.respond(encodeMessage(kind, value));
}
