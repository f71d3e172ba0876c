import type { Msg } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { HubMetrics } from '../metrics/index.js';
import { mintUserJwt } from '../transport/auth/index.js';
import {
  Keys,
  MESSAGE_SCHEMA_VERSION,
  Messages,
  Subjects,
  encodeMessage,
  peerDrops,
  replyInboxKey,
  respondMessage,
  sameReport,
  serveRenewals,
  subscribeMessages,
  type Ack,
  type AgentKey,
  type ClusterReport,
  type KeptBuckets,
  type NatsLink,
  type RegisterRequest,
  type RouteSigner,
} from '../transport/index.js';
import type { Fleet } from './fleet.js';
import type { HubOptions } from './options.js';
import { decideRegistration, tokenAccepted, type RegistrationChannel } from './registration.js';
import { reportProblem } from './report-check.js';
import { LatestProofs, proofDropped, provenAt } from './signed-messages.js';
import type { HashSettings } from '../sharding/index.js';

export interface LeaderDutiesOptions extends Pick<HubOptions, 'tokens' | 'agentIssuer' | 'agentIdentityTtlMs'> {
  /** The fleet's hash settings (`--hash-algorithm`): reports that hash otherwise are dropped. */
  fleetHash?: HashSettings | undefined;
  link: NatsLink;
  buckets: Pick<KeptBuckets, 'clusters' | 'state'>;
  fleet: Fleet;
  signer: RouteSigner;
  metrics: Pick<HubMetrics, 'registrations'>;
  logger: Logger;
  now: () => number;
  isLeader: () => boolean;
  /**
   * Whether the fleet has read every bucket. Until then registrations go unanswered (agents ask again) and reports
   * are dropped (agents send them again): a removal not read yet would let a removed cluster back in.
   */
  loaded: () => boolean;
  /** Called when a stored report may change the plan. */
  changed: () => void;
}

export interface LeaderDuties {
  /** Starts serving: registrations, reports and lease renewals. */
  begin(): void;
  /** Stops serving (leadership lost, or the hub stops). */
  end(): void;
  /**
   * Stores an acknowledgement while leader, so that hubs started later (all restarted, or a new leader) complete
   * handovers on it too, rather than waiting for the proxies' lease to run out. Written ACK_STORE_DELAY_MS later,
   * the latest of each shard: the in-memory ack (hub-inputs) is what this hub acts on.
   */
  storeAck(ack: Ack): void;
}

/**
 * How long acknowledgements wait before they are stored. A change acknowledged by every proxy would otherwise put
 * one KV write per shard into the burst of tables still being delivered (the server's and the hub's CPU); a crash
 * in this window loses them as it loses acks sent while no hub runs (the proxies repeat theirs).
 */
export const ACK_STORE_DELAY_MS = 100;

/**
 * What only the leader serves: one writer for the registry, the reports and the acknowledgements in KV, and one
 * signer of lease renewals, judged against the tables it published.
 */
export function createLeaderDuties(options: LeaderDutiesOptions): LeaderDuties {
  return new Leader(options);
}

/** The leader's duties and the state they keep: subscriptions, acknowledgements waiting to be stored, report proofs. */
class Leader implements LeaderDuties {
  private subscriptions: { unsubscribe(): void }[] = [];
  /** Acknowledgements to store, the latest per key. */
  private readonly unstored = new Map<string, Ack>();
  private storeTimer: NodeJS.Timeout | undefined;
  /** The reports that count: kept by this leader alone, a new leader starts afresh. */
  private readonly reportProofs: LatestProofs;

  constructor(private readonly options: LeaderDutiesOptions) {
    this.reportProofs = new LatestProofs(options.now);
  }

  begin(): void {
    const { link, signer, logger, fleet } = this.options;
    this.subscriptions.push(
      serveRenewals({
        link,
        signer,
        logger,
        published: (operator, shard) => fleet.routes.get(operator)?.get(shard)?.table.version ?? 0,
      }),
      subscribeMessages({
        link,
        subject: Subjects.register,
        kind: Messages.registerRequest,
        logger,
        requests: true,
        handler: (request, msg) => this.register(request, 'bootstrap', msg),
      }),
      subscribeMessages({
        link,
        subject: Subjects.registerAll,
        kind: Messages.registerRequest,
        logger,
        requests: true,
        handler: (request, msg) => {
          // Only the agent of a cluster may publish on its subject (its permissions): the subject is the proof.
          if (msg.subject === Subjects.registerAs(request.cluster.name)) return this.register(request, 'identity', msg);
          peerDrops.warn(logger, `registration on ${msg.subject}`, { subject: msg.subject, cluster: request.cluster.name }, 'dropped a registration whose cluster does not match its subject');
        },
      }),
      subscribeMessages({
        link,
        subject: Subjects.reportAll,
        kind: Messages.clusterReport,
        logger,
        handler: (report, msg) => this.storeReport(report, msg),
      }),
    );
  }

  end(): void {
    for (const s of this.subscriptions) s.unsubscribe();
    this.subscriptions = [];
    // Still leader when the hub stops: what waits is stored now; leadership lost: the new leader stores its own.
    this.storeAcks();
  }

  storeAck(ack: Ack): void {
    if (!this.options.isLeader()) return;
    this.unstored.set(Keys.ack(ack.operator, ack.shard), ack);
    this.storeTimer ??= setTimeout(() => this.storeAcks(), ACK_STORE_DELAY_MS);
  }

  private storeAcks(): void {
    const { buckets, logger, isLeader } = this.options;
    clearTimeout(this.storeTimer);
    this.storeTimer = undefined;
    const acks = [...this.unstored];
    this.unstored.clear();
    if (!isLeader()) return;
    for (const [key, ack] of acks) {
      buckets.state
        .put(key, encodeMessage(Messages.ack, ack))
        .catch((err: unknown) => logger.warn({ err, operator: ack.operator, shard: ack.shard }, 'could not store an acknowledgement'));
    }
  }

  private async register(request: RegisterRequest, channel: RegistrationChannel, msg: Msg): Promise<void> {
    const { options } = this;
    const { tokens, agentIssuer: issuer, buckets, fleet, metrics, logger, now } = options;
    if (!options.loaded()) return;
    const name = request.cluster.name;
    const binding = fleet.agentKeys.get(name);
    const decision = decideRegistration({
      request,
      channel,
      tokens,
      existing: fleet.clusters.get(name),
      removed: fleet.removed.has(name),
      requesterKey: replyInboxKey(msg.reply),
      binding,
      mints: issuer !== undefined && request.publicKey !== undefined,
      proven: provenAt(channel === 'identity' ? (binding?.publicKey ?? request.publicKey) : request.publicKey, msg, now()) !== undefined,
      now: new Date(now()),
    });
    if (decision.write === 'put') {
      await buckets.clusters.put(Keys.cluster(name), encodeMessage(Messages.clusterRecord, decision.record));
      fleet.recordRegistration(decision.record);
      logger.info({ cluster: name, server: request.cluster.server, channel }, 'cluster registered');
    } else if (!decision.reply.ok) {
      // Under its own identity the cluster is proven (its subject); by token, only once its token is accepted: every
      // wrong token shares one line, so that a bootstrap holder's flood hides no cluster's refusal
      // (test/integration/reply-injection.test.ts, 'logs a flood of refused and dropped requests as one line a cause
      // each interval, with the count held back').
      const sender = channel === 'identity' || tokenAccepted(request.token ?? '', name, tokens) ? `${channel} ${name}` : channel;
      peerDrops.warn(logger, `registration refused ${sender}`, { cluster: name, channel, reason: decision.reply.error }, 'registration refused');
    }
    metrics.registrations.inc({ result: !decision.reply.ok ? 'refused' : decision.write === 'put' ? 'accepted' : 'unchanged' });
    let jwt: string | undefined;
    const mintFor = decision.reply.ok ? request.publicKey : undefined;
    if (issuer && mintFor !== undefined) {
      // Bound before the identity is minted: a renewal that follows at once is judged against this key.
      if (decision.bind !== undefined) {
        const bound: AgentKey = { schema: MESSAGE_SCHEMA_VERSION, cluster: name, ...decision.bind, boundAt: new Date(now()).toISOString() };
        await buckets.state.put(Keys.agentKey(name), encodeMessage(Messages.agentKey, bound));
        fleet.recordAgentKey(bound);
      }
      jwt = await mintUserJwt({
        issuerSeed: issuer.seed,
        account: issuer.account,
        identity: { role: 'agent', cluster: name },
        publicKey: mintFor,
        expiresAt: Math.floor((now() + options.agentIdentityTtlMs) / 1000),
      });
    }
    respondMessage(msg, Messages.registerReply, { ...decision.reply, ...(jwt ? { jwt } : {}) });
  }

  private async storeReport(report: ClusterReport, msg: Msg): Promise<void> {
    const { options } = this;
    const { buckets, fleet, logger } = options;
    if (!options.loaded()) return;
    const { subject } = msg;
    if (subject !== Subjects.report(report.cluster)) {
      peerDrops.warn(logger, `report on ${subject}`, { subject, cluster: report.cluster }, 'dropped a report whose cluster does not match its subject');
      return;
    }
    if (!fleet.clusters.has(report.cluster)) {
      // A removed cluster's agent reports until it is stopped: expected, so not a warning each time.
      if (fleet.removed.has(report.cluster)) logger.debug({ cluster: report.cluster }, 'dropped a report from a removed cluster');
      else peerDrops.warn(logger, `report unregistered ${subject}`, { cluster: report.cluster }, 'dropped a report from an unregistered cluster');
      return;
    }
    // A copy of the cluster's identity could otherwise report for it: pods (webhook endpoints), namespaces, configs.
    const verdict = this.reportProofs.judge(fleet.agentKeys.get(report.cluster), msg);
    if (verdict !== 'counts') {
      peerDrops.warn(logger, `report ${verdict} ${subject}`, { cluster: report.cluster }, proofDropped('report', verdict));
      return;
    }
    const refused = reportProblem(report, options.fleetHash);
    if (refused !== undefined) {
      peerDrops.warn(logger, `report refused ${subject}`, { cluster: report.cluster, problem: refused }, 'dropped a report the hub cannot plan with; the last good one stays');
      return;
    }
    const known = fleet.reports.get(report.cluster);
    if (known && sameReport(known, report)) return;
    const revision = await buckets.state.put(Keys.report(report.cluster), encodeMessage(Messages.clusterReport, report));
    fleet.recordReport(report, revision);
    options.changed();
  }
}
