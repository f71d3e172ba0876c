import { randomBytes } from 'node:crypto';
import { AckPolicy, DeliverPolicy, jetstreamManager, type ConsumerConfig, type JetStreamManager } from '@nats-io/jetstream';
import type { Msg, Subscription } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import { isStreamNotFound } from './bucket-keeper.js';
import type { NatsLink } from './connection.js';
import { MESSAGE_SCHEMA_VERSION, Messages, type FeedKind, type WatchReply, type WatchRequest } from './messages.js';
import { Buckets, Keys, Subjects, decodeToken } from './names.js';
import { encodeMessage } from './codec.js';
import { peerDrops, subscribeMessages } from './pubsub.js';

/** Every hub serves feeds (leader or standby): one of them answers each request. */
const QUEUE = 'ctrlmesh-hub-feeds';

/** Idle heartbeat of a feed: the requester reopens one silent for 2.5 of these (a consumer lost with its server). */
export const FEED_HEARTBEAT_MS = 2_000;

/**
 * A feed nobody subscribes to is deleted by the server after this long: a requester that stopped, restarted its
 * feed or lost its connection leaves no consumer behind.
 */
const FEED_INACTIVE_MS = 10_000;

/**
 * The most feeds one requester subject keeps on this hub; asking for more deletes its oldest. Every holder of an
 * identity may ask as often as it likes, so without a bound it could have the server hold any number of consumers.
 * Replicas of one shard share its subject, each with a feed and, for a moment after a reconnection, an old one.
 */
export const FEEDS_PER_REQUESTER = 32;

const ms = (value: number): number => value * 1_000_000;

/** What the requester of a watch subject may follow in a feed of `feed`: the bucket and the consumer's filter, or none. */
export function feedTarget(subject: string, feed: FeedKind): { bucket: string; filter: string } | undefined {
  return feedFilters(subject)?.[feed];
}

/** What a requester's subject lets it follow: the filter of each feed kind it may ask for. */
function feedFilters(subject: string): Partial<Record<FeedKind, { bucket: string; filter: string }>> | undefined {
  const tokens = subject.split('.');
  const named = tokens.slice(3).every((token) => decodeToken(token) !== undefined);
  if (`${tokens[0]}.${tokens[1]}.` !== Subjects.watchAll.slice(0, -1) || !named) return undefined;
  if (tokens[2] === 'shard' && tokens.length === 5) {
    return { routes: { bucket: Buckets.routes, filter: `$KV.${Buckets.routes}.${tokens[3]}.${tokens[4]}` } };
  }
  if (tokens[2] === 'cluster' && tokens.length === 4) {
    return {
      routes: { bucket: Buckets.routes, filter: `$KV.${Buckets.routes}.>` },
      acks: { bucket: Buckets.state, filter: `$KV.${Buckets.state}.${Keys.ackAll}` },
    };
  }
  return undefined;
}

/** The consumer of a feed: pushed to the requester's feed subject, no acks, in memory, gone once nobody listens. */
export function feedConsumer(deliver: string, filter: string, request: WatchRequest, streamCreated: string, heartbeatMs: number): Partial<ConsumerConfig> {
  const resume = request.from && request.from.streamCreated === streamCreated ? request.from.revision : undefined;
  return {
    name: `feed_${randomBytes(10).toString('hex')}`,
    deliver_subject: deliver,
    filter_subject: filter,
    ack_policy: AckPolicy.None,
    ...(resume === undefined ? { deliver_policy: DeliverPolicy.LastPerSubject } : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: resume }),
    idle_heartbeat: ms(heartbeatMs),
    inactive_threshold: ms(FEED_INACTIVE_MS),
    mem_storage: true,
    num_replicas: 1,
  };
}

/**
 * The hub's side of feeds. Agents and proxies may use no JetStream API at all: every request of it names where the
 * server delivers (a push consumer's deliver subject, the reply subject of a get or an info), and the server checks
 * neither against the requester's permissions, so any such access would let it have the server publish on any
 * subject of the account, KV writes included (test/integration/control-attacks.test.ts, 'no JetStream API request
 * of an agent or a proxy'). A hub makes their consumers instead, with the filter its request subject allows and the
 * deliver subject only the requester may read.
 */
export function serveWatches(options: { link: NatsLink; logger: Logger; heartbeatMs?: number }): Subscription {
  const { link, logger } = options;
  const heartbeatMs = options.heartbeatMs ?? FEED_HEARTBEAT_MS;
  let manager: Promise<JetStreamManager> | undefined;
  const jsm = (): Promise<JetStreamManager> => {
    // Shorter than the requester's wait for an answer (5 s), so a slow JetStream is answered as a refusal in time.
    manager ??= jetstreamManager(link.nc, { checkAPI: false, timeout: 4_000 });
    return manager;
  };
  /** The feeds made for each requester subject, oldest first. */
  const made = new Map<string, { stream: string; name: string }[]>();

  const open = async (request: WatchRequest, msg: Msg): Promise<WatchReply> => {
    const target = feedTarget(msg.subject, request.feed);
    if (!target) return { schema: MESSAGE_SCHEMA_VERSION, ok: false, error: `no ${request.feed} feed for ${msg.subject}` };
    const stream = `KV_${target.bucket}`;
    const manager = await jsm();
    let streamCreated: string;
    try {
      streamCreated = (await manager.streams.info(stream)).created;
    } catch (err) {
      if (isStreamNotFound(err)) return { schema: MESSAGE_SCHEMA_VERSION, ok: false, error: `the bucket ${target.bucket} does not exist yet` };
      throw err;
    }
    const config = feedConsumer(Subjects.feed(msg.subject, request.id), target.filter, request, streamCreated, heartbeatMs);
    const info = await manager.consumers.add(stream, config);
    const feeds = made.get(msg.subject) ?? [];
    feeds.push({ stream, name: info.name });
    made.set(msg.subject, feeds);
    while (feeds.length > FEEDS_PER_REQUESTER) {
      const oldest = feeds.shift();
      if (oldest) void manager.consumers.delete(oldest.stream, oldest.name).catch(() => undefined);
    }
    return {
      schema: MESSAGE_SCHEMA_VERSION,
      ok: true,
      consumer: info.name,
      streamCreated,
      // Delivered already (the consumer starts at once) and still to come, of the values current now.
      initial: info.delivered.consumer_seq + info.num_pending,
      heartbeatMs,
    };
  };

  return subscribeMessages({
    link,
    subject: Subjects.watchAll,
    kind: Messages.watchRequest,
    logger,
    queue: QUEUE,
    handler: async (request, msg) => {
      let reply: WatchReply;
      try {
        reply = await open(request, msg);
      } catch (err) {
        logger.warn({ err, subject: msg.subject }, 'could not open a feed');
        reply = { schema: MESSAGE_SCHEMA_VERSION, ok: false, error: `could not open the feed: ${(err as Error).message}` };
      }
      if (!reply.ok) peerDrops.warn(logger, `feed ${msg.subject}`, { subject: msg.subject, error: reply.error }, 'refused a feed');
      // On the feed itself, not on a reply subject: the requester names none, so it can aim the answer nowhere else.
      link.nc.publish(Subjects.feed(msg.subject, request.id), encodeMessage(Messages.watchReply, reply));
    },
  });
}
