import type { KV } from '@nats-io/kv';
import type { Logger } from 'pino';
import { randomBytes } from 'node:crypto';
import type { Msg } from '@nats-io/transport-node';
import { CtrlmeshError, ErrorCodes } from '../errors.js';
import { RouteTableKind, openRenewal, openRouteTable, type RouteSigner } from './route-signing.js';
import type { NatsLink } from './connection.js';
import { watchFeed } from './feed-watch.js';
import type { Watch } from './reopened.js';
import { Messages, MESSAGE_SCHEMA_VERSION, type Ack, type RenewReply } from './messages.js';
import { Buckets, Keys, Subjects } from './names.js';
import { encodeMessage, receiveMessage } from './codec.js';
import { answer, peerDrops, publishMessage, subscribeMessages } from './pubsub.js';
import type { RouteTable } from './route-table.js';

/**
 * Writes a route table, signed, under `<operator>.<shard>`. With `expectedRevision` the write is a compare-and-set
 * (0 = the key must not exist yet), so two hubs can never interleave versions. Returns the KV revision.
 */
export async function publishRouteTable(routes: KV, signer: RouteSigner, table: RouteTable, expectedRevision?: number): Promise<number> {
  return publishSealedRouteTable(routes, table, signer.seal(RouteTableKind, table), expectedRevision);
}

/** `publishRouteTable` of a table sealed already (`signer.seal(RouteTableKind, table)`): the caller keeps the bytes. */
export async function publishSealedRouteTable(routes: KV, table: RouteTable, data: Uint8Array, expectedRevision?: number): Promise<number> {
  const key = Keys.route(table.operator, table.shard);
  if (expectedRevision === undefined) return routes.put(key, data);
  if (expectedRevision === 0) return routes.create(key, data);
  return routes.update(key, data, expectedRevision);
}

/** The current route table of a shard and its KV revision, or undefined if none (or the stored one is invalid or unsigned). */
export async function readRouteTable(
  routes: KV,
  id: { operator: string; shard: string },
  trusted?: readonly string[],
): Promise<{ table: RouteTable; revision: number } | undefined> {
  const entry = await routes.get(Keys.route(id.operator, id.shard));
  if (!entry || entry.operation !== 'PUT') return undefined;
  const decoded = openRouteTable(entry.value, trusted);
  return decoded.ok ? { table: decoded.value, revision: entry.revision } : undefined;
}

/** A table read from KV: verified (against `trusted`, if given) and decoded, or logged and dropped. */
export function receiveRouteTable(data: Uint8Array, context: { logger: Logger; source: string; trusted?: readonly string[] }): RouteTable | undefined {
  const opened = openRouteTable(data, context.trusted);
  if (opened.ok) return opened.value;
  context.logger.warn({ source: context.source, reason: opened.reason }, 'dropped a route table that is malformed or not signed by a trusted key');
  return undefined;
}

export interface WatchRouteTableOptions {
  link: NatsLink;
  operator: string;
  shard: string;
  logger: Logger;
  /** Public keys whose signatures are accepted. */
  trusted: readonly string[];
  /**
   * Called with each verified table written under the shard's key, in KV order. It does not filter versions: the
   * consumer judges each table (a proxy refuses one that would pin it), so an ignored table must not move a mark.
   */
  onTable: (table: RouteTable) => void;
}

/** Follows one shard's route table; survives NATS restarts and waits for the bucket if the hub has not made it. */
export function watchRouteTable(options: WatchRouteTableOptions): Watch {
  return followTables(Subjects.watchShard(options.operator, options.shard), options);
}

export interface WatchRouteTablesOptions {
  link: NatsLink;
  /** The agent's cluster: its feed carries every operator's tables. */
  cluster: string;
  logger: Logger;
  /** Public keys whose signatures are accepted; omitted = any valid signature (the bus's permissions are trusted). */
  trusted?: readonly string[];
  /** Called with each valid table written; deletions and invalid tables are skipped (the latter logged). */
  onTable: (table: RouteTable) => void;
}

/** Follows every route table as it is written (an agent), like watchRouteTable but without its one-shard version filter. */
export function watchRouteTables(options: WatchRouteTablesOptions): Watch {
  return followTables(Subjects.watchCluster(options.cluster), options);
}

/** The route tables of the feed a hub opens for the identity of `subject` (src/transport/feed-server.ts). */
function followTables(subject: string, options: Pick<WatchRouteTablesOptions, 'link' | 'logger' | 'trusted' | 'onTable'>): Watch {
  return watchFeed({
    link: options.link,
    subject,
    feed: 'routes',
    logger: options.logger,
    onEntry: (entry) => {
      if (entry.operation !== 'PUT') return;
      const table = receiveRouteTable(entry.value, {
        logger: options.logger,
        source: `${Buckets.routes}/${entry.key}`,
        ...(options.trusted ? { trusted: options.trusted } : {}),
      });
      if (table) options.onTable(table);
    },
  });
}

/**
 * Follows the acknowledgements the hub leader stored (state bucket, `ack.<operator>.<shard>`), for the agent of
 * `cluster`: the latest of each shard, with the cluster rules its proxy has in force. `onAck` gets each valid one, and
 * `undefined` for a shard whose ack was deleted; a value stored under another shard's key is dropped.
 */
export function watchStoredAcks(options: { link: NatsLink; cluster: string; logger: Logger; onAck: (key: string, ack: Ack | undefined) => void }): Watch {
  return watchFeed({
    link: options.link,
    subject: Subjects.watchCluster(options.cluster),
    feed: 'acks',
    logger: options.logger,
    onEntry: (entry) => {
      if (entry.operation !== 'PUT') return options.onAck(entry.key, undefined);
      const ack = receiveMessage(Messages.ack, entry.value, { logger: options.logger, source: `${Buckets.state}/${entry.key}` });
      if (ack && entry.key === Keys.ack(ack.operator, ack.shard)) options.onAck(entry.key, ack);
    },
  });
}

export interface AcknowledgeOptions {
  link: NatsLink;
  operator: string;
  shard: string;
  version: number;
  /** The acknowledging proxy (pod name). */
  from?: string;
  /** The table's cluster rules the proxy has in force (absent: the table has none it applies). */
  rules?: AckRule[];
  now?: Date;
}

/** One cluster rule a proxy has in force, as its acknowledgement names it. */
export type AckRule = NonNullable<Ack['rules']>[number];

/**
 * A proxy tells the hub it has applied `version` of its route table. Fire-and-forget: a lost ack only delays a
 * handover until the shard's lease expires, so a proxy may also repeat its latest ack periodically.
 */
export function acknowledge(options: AcknowledgeOptions): void {
  const ack: Ack = {
    schema: MESSAGE_SCHEMA_VERSION,
    operator: options.operator,
    shard: options.shard,
    version: options.version,
    ackedAt: (options.now ?? new Date()).toISOString(),
    ...(options.from ? { from: options.from } : {}),
    ...(options.rules?.length ? { rules: options.rules } : {}),
  };
  publishMessage(options.link, Subjects.ack(options.operator, options.shard), Messages.ack, ack);
}

/**
 * Whether a proxy's message came on the subject of the shard it speaks for. Only that shard's proxy may publish
 * there (the bus's permissions), so the subject is the proof of who sends; a mismatch is a confused or malicious
 * sender, logged and dropped.
 */
function sentOnItsSubject(
  msg: Msg,
  claimed: { operator: string; shard: string },
  subjectOf: (operator: string, shard: string) => string,
  what: string,
  logger: Logger,
): boolean {
  if (msg.subject === subjectOf(claimed.operator, claimed.shard)) return true;
  peerDrops.warn(logger, `${what} ${msg.subject}`, { subject: msg.subject, operator: claimed.operator, shard: claimed.shard }, `dropped ${what} whose shard does not match its subject`);
  return false;
}

/** Receives every proxy's acknowledgements (validated). */
export function subscribeAcks(options: { link: NatsLink; logger: Logger; onAck: (ack: Ack) => void }): { unsubscribe(): void } {
  return subscribeMessages({
    link: options.link,
    subject: Subjects.ackAll,
    kind: Messages.ack,
    logger: options.logger,
    handler: (ack, msg) => {
      if (sentOnItsSubject(msg, ack, Subjects.ack, 'an ack', options.logger)) options.onAck(ack);
    },
  });
}

export interface RenewOptions {
  link: NatsLink;
  operator: string;
  shard: string;
  /** The latest version applied and acknowledged. */
  acknowledged: number;
  trusted: readonly string[];
  timeoutMs: number;
  logger: Logger;
}

/**
 * Asks the hub leader to extend the shard's lease. Resolves with the leader's verified answer (the nonce and the
 * shard checked too); no leader, a timeout or an answer that does not verify is a CtrlmeshError (NATS).
 */
export async function requestRenewal(options: RenewOptions): Promise<RenewReply> {
  const { operator, shard } = options;
  const nonce = randomBytes(12).toString('base64url');
  let msg: Msg;
  try {
    msg = await options.link.nc.request(
      Subjects.renew(operator, shard),
      encodeMessage(Messages.renewRequest, { schema: MESSAGE_SCHEMA_VERSION, operator, shard, acknowledged: options.acknowledged, nonce }),
      { timeout: options.timeoutMs },
    );
  } catch (err) {
    throw new CtrlmeshError(ErrorCodes.NATS, `no lease renewal for ${operator}/${shard}: ${(err as Error).message}`, { cause: err });
  }
  const reply = openRenewal(msg.data, options.trusted);
  if (!reply.ok) throw new CtrlmeshError(ErrorCodes.NATS, `a lease renewal for ${operator}/${shard} was refused: ${reply.reason}`);
  if (reply.value.nonce !== nonce || reply.value.operator !== operator || reply.value.shard !== shard) {
    throw new CtrlmeshError(ErrorCodes.NATS, `a lease renewal for ${operator}/${shard} answered another request`);
  }
  return reply.value;
}

/**
 * The hub leader's side of renewals: answers each proxy with the version published for its shard, signed, and
 * extends only a proxy that acknowledged that version. Nothing is stored: a lease extension given before a
 * revocation ends, at the latest, one lease after the revocation, which is when the hub grants the unit elsewhere.
 */
export function serveRenewals(options: {
  link: NatsLink;
  signer: RouteSigner;
  logger: Logger;
  /** The version published for a shard, 0 if none. */
  published: (operator: string, shard: string) => number;
}): { unsubscribe(): void } {
  return subscribeMessages({
    link: options.link,
    subject: Subjects.renewAll,
    kind: Messages.renewRequest,
    logger: options.logger,
    requests: true,
    handler: (request, msg) => {
      if (!sentOnItsSubject(msg, request, Subjects.renew, 'a renewal', options.logger)) return;
      const version = options.published(request.operator, request.shard);
      const reply: RenewReply = {
        schema: MESSAGE_SCHEMA_VERSION,
        operator: request.operator,
        shard: request.shard,
        nonce: request.nonce,
        version,
        extended: version > 0 && request.acknowledged >= version,
      };
      answer(msg, options.signer.seal(Messages.renewReply, reply));
    },
  });
}
