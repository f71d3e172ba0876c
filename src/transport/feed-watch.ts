import { randomBytes } from 'node:crypto';
import type { Msg } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { CtrlmeshError, ErrorCodes } from '../errors.js';
import type { NatsLink } from './connection.js';
import { reopenUntilStopped, type Opening, type Watch } from './reopened.js';
import { decodeMessage } from './codec.js';
import { MESSAGE_SCHEMA_VERSION, Messages, type FeedKind, type WatchReply, type WatchRequest } from './messages.js';
import { Subjects } from './names.js';
import { publishMessage } from './pubsub.js';

/** One KV revision a feed delivered. */
export interface FeedEntry {
  key: string;
  revision: number;
  operation: 'PUT' | 'DEL' | 'PURGE';
  value: Uint8Array;
}

export interface WatchFeedOptions {
  link: NatsLink;
  /** The identity's watch subject (Subjects.watchShard, Subjects.watchCluster): the server lets only it publish there. */
  subject: string;
  feed: FeedKind;
  logger: Logger;
  /** Called for every put and delete, in revision order, never twice for one revision of one stream. */
  onEntry: (entry: FeedEntry) => void;
  /** Called each time the feed has delivered the current values (after start and after each reopening). */
  onCurrent?: () => void;
  retryMs?: number;
  requestTimeoutMs?: number;
}

/** A feed silent for this many heartbeats is reopened: its consumer went with a server, or the bucket was deleted. */
const MISSED_HEARTBEATS = 2.5;

/** Metadata of a delivered message, from its `$JS.ACK` reply subject (9 tokens, or 12 with a domain and account hash). */
function delivery(reply: string | undefined): { consumer: string; streamSeq: number; consumerSeq: number } | undefined {
  const tokens = reply?.split('.') ?? [];
  if (tokens[0] !== '$JS' || tokens[1] !== 'ACK') return undefined;
  const at = tokens.length === 9 ? 3 : tokens.length >= 11 ? 5 : -1;
  if (at < 0) return undefined;
  const streamSeq = Number(tokens[at + 2]);
  const consumerSeq = Number(tokens[at + 3]);
  return Number.isSafeInteger(streamSeq) && Number.isSafeInteger(consumerSeq) ? { consumer: tokens[at] ?? '', streamSeq, consumerSeq } : undefined;
}

/** The KV entry a feed message carries: the key is the subject after `$KV.<bucket>.`. */
function entryOf(msg: Msg, streamSeq: number): FeedEntry | undefined {
  const match = /^\$KV\.[^.]+\.(.+)$/u.exec(msg.subject);
  if (!match?.[1]) return undefined;
  const op = msg.headers?.get('KV-Operation');
  return { key: match[1], revision: streamSeq, operation: op === 'DEL' || op === 'PURGE' ? op : 'PUT', value: msg.data };
}

/**
 * Follows KV keys through a feed a hub opens on the identity's behalf (src/transport/feed-server.ts), since agents and
 * proxies may use no JetStream API. It subscribes to a new feed subject, asks a hub to deliver there, and survives
 * NATS trouble as a KV watch does: when the feed goes silent, skips a message, or the connection comes back, a new
 * one is opened from the revision after the last one seen; a bucket created again is read from the start. A consumer
 * delivers what the stream stored only, never a compare-and-set it refused (test/integration/control-attacks.test.ts,
 * 'a compare-and-set the bucket refuses never reaches the proxy').
 */
export function watchFeed(options: WatchFeedOptions): Watch {
  const { link, logger } = options;
  let lastRevision = 0;
  /** When the watched stream was created, as the hub said at the last opening. */
  let streamCreated: string | undefined;

  /** One feed, from subscribing to its end (reopened by the loop). */
  const follow = async (opening: Opening): Promise<void> => {
    const id = randomBytes(12).toString('hex');
    const buffered: Msg[] = [];
    let reply: WatchReply | undefined;
    let nextSeq = 1;
    let lastHeard = performance.now();
    let announced = false;
    let done: () => void = () => undefined;
    const ended = new Promise<void>((resolve) => (done = resolve));
    const finish = (why?: string): void => {
      if (why) logger.info({ subject: options.subject, feed: options.feed, why }, 'reopening a KV feed');
      done();
    };
    const announce = (): void => {
      if (announced) return;
      announced = true;
      options.onCurrent?.();
    };
    const take = (msg: Msg): void => {
      lastHeard = performance.now();
      if (msg.headers?.code === 100) {
        // An idle heartbeat names the last consumer sequence sent: one later than what arrived means a loss.
        const last = Number(msg.headers.get('Nats-Last-Consumer'));
        if (Number.isSafeInteger(last) && last >= nextSeq) finish('a heartbeat names messages that never arrived');
        return;
      }
      const meta = delivery(msg.reply);
      // Only the server and the hub may publish on a feed subject: this is no message of the feed's consumer.
      if (!meta || meta.consumer !== reply?.consumer) return;
      if (meta.consumerSeq !== nextSeq) return finish('a message was skipped');
      nextSeq += 1;
      const entry = entryOf(msg, meta.streamSeq);
      if (entry && entry.revision > lastRevision) {
        lastRevision = entry.revision;
        try {
          options.onEntry(entry);
        } catch (err) {
          logger.error({ err, key: entry.key }, 'a KV feed handler failed');
        }
      }
      if (meta.consumerSeq >= (reply.initial ?? 0)) announce();
    };
    let answered: (reply: WatchReply) => void = () => undefined;
    const answer = new Promise<WatchReply>((resolve) => (answered = resolve));
    const sub = link.nc.subscribe(Subjects.feed(options.subject, id), {
      callback: (err, msg) => {
        if (err) return finish(`subscription error: ${err.message}`);
        if (reply) return take(msg);
        // The hub's answer comes on the feed too, with no reply subject; the consumer's messages may come before it.
        if (!msg.reply && msg.headers?.code !== 100) {
          const decoded = decodeMessage(Messages.watchReply, msg.data);
          if (decoded.ok) answered(decoded.value);
          return;
        }
        buffered.push(msg);
      },
    });
    opening.onEnd(() => finish());
    try {
      if (opening.overtaken) return;
      const asked = streamCreated;
      const request: WatchRequest = {
        schema: MESSAGE_SCHEMA_VERSION,
        feed: options.feed,
        id,
        ...(lastRevision > 0 && asked ? { from: { revision: lastRevision + 1, streamCreated: asked } } : {}),
      };
      await link.nc.flush();
      publishMessage(link, options.subject, Messages.watchRequest, request);
      const timeoutMs = options.requestTimeoutMs ?? 5_000;
      let timer: NodeJS.Timeout | undefined;
      const got = await Promise.race([
        answer,
        ended.then(() => undefined),
        new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), timeoutMs))),
      ]).finally(() => clearTimeout(timer));
      if (got === undefined) {
        if (opening.overtaken) return;
        throw new CtrlmeshError(ErrorCodes.NATS, `no hub opened a ${options.feed} feed on ${options.subject} within ${timeoutMs} ms (is a hub running?)`);
      }
      reply = got;
      if (!reply.ok || !reply.consumer || !reply.streamCreated) throw new CtrlmeshError(ErrorCodes.NATS, `no ${options.feed} feed on ${options.subject}: ${reply.error ?? 'refused'}`);
      if (asked !== undefined && reply.streamCreated !== asked) {
        logger.warn({ subject: options.subject, feed: options.feed }, 'the KV bucket was created again; reading it from the start');
        lastRevision = 0;
      }
      streamCreated = reply.streamCreated;
      if ((reply.initial ?? 0) === 0) announce();
      for (const msg of buffered.splice(0)) take(msg);
      const heartbeatMs = reply.heartbeatMs ?? 2_000;
      const silence = setInterval(() => {
        if (performance.now() - lastHeard > heartbeatMs * MISSED_HEARTBEATS) finish('no heartbeat');
      }, heartbeatMs);
      silence.unref();
      try {
        await ended;
      } finally {
        clearInterval(silence);
      }
    } finally {
      sub.unsubscribe();
    }
  };

  return reopenUntilStopped({
    link,
    retryMs: options.retryMs ?? 1_000,
    follow,
    onError: (err) => logger.warn({ err, subject: options.subject, feed: options.feed }, 'KV feed failed; retrying'),
  });
}
