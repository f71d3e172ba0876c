import Fastify from 'fastify';
import type { Msg } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { createHubMetrics, createRegistry, registerOpsRoutes, type HubMetrics } from '../metrics/index.js';
import {
  Keys,
  Messages,
  Subjects,
  connectNats,
  createKeptBuckets,
  encodeMessage,
  respondMessage,
  routeSigner,
  serveRenewals,
  subscribeAcks,
  subscribeMessages,
  watchKv,
  type ClusterReport,
  type KeptBuckets,
  type NatsLink,
  type RegisterRequest,
  type RouteSigner,
  type Watch,
} from '../transport/index.js';
import { DebouncedRunner } from '../runtime/index.js';
import { Fleet } from './fleet.js';
import { clusterHealth, type ClusterHealth } from './health.js';
import { electLeader, type LeaderElection } from './leader.js';
import type { HubOptions } from './options.js';
import { desiredPlan } from './desired.js';
import type { UnitKey } from './handover.js';
import { reconcile } from './reconciler.js';
import { decideRegistration, type RegistrationChannel } from './registration.js';
import { mintUserJwt } from '../transport/auth/index.js';
import { hubStatus, type HubStatus } from './status.js';

export interface HubDependencies {
  logger: Logger;
  registry?: Registry;
  now?: () => number;
}

export interface HubHandle {
  identity: string;
  /** Base URL of /healthz, /readyz, /metrics and /status. */
  url: string;
  isLeader(): boolean;
  status(): HubStatus;
  /** Stops; `releaseLease: false` behaves like a crash for the standby (it waits for the lease to expire). */
  stop(options?: { releaseLease?: boolean }): Promise<void>;
}

/** Starts one hub instance: leader or hot standby, decided by the lease in KV. */
export async function startHub(options: HubOptions, deps: HubDependencies): Promise<HubHandle> {
  const logger = deps.logger.child({ component: 'hub', identity: options.identity });
  const now = deps.now ?? Date.now;
  const registry = deps.registry ?? createRegistry('hub');
  const metrics = createHubMetrics(registry);
  const signer = routeSigner(options.signingSeed);
  const link = await connectNats({ config: options.nats, name: `ctrlmesh-hub-${options.identity}`, logger });
  const buckets = await createKeptBuckets({ js: link.js, replicas: options.replicas, leaseTtlMs: options.leaseTtlMs, logger });
  const fleet = new Fleet(logger, [signer.publicKey]);
  const core = new HubCore({ options, deps: { ...deps, logger }, link, buckets, fleet, metrics, now, signer });
  const server = Fastify({ logger: false });
  registerOpsRoutes(server, { registry, readiness: () => core.readiness() });
  server.get('/status', async () => core.status());
  const address = await server.listen({ host: options.listen.host, port: options.listen.port });
  logger.info({ url: address }, 'hub status API listening');
  core.start();
  return {
    identity: options.identity,
    url: address,
    isLeader: () => core.isLeader(),
    status: () => core.status(),
    async stop(stopOptions = {}) {
      await core.stop(stopOptions.releaseLease ?? true);
      await server.close();
      await link.close();
    },
  };
}

interface HubCoreOptions {
  options: HubOptions;
  deps: HubDependencies;
  link: NatsLink;
  buckets: KeptBuckets;
  fleet: Fleet;
  metrics: HubMetrics;
  now: () => number;
  signer: RouteSigner;
}

/** The hub's moving parts: watches and subscriptions every instance runs, and the leader-only duties. */
class HubCore {
  private readonly watches: Watch[] = [];
  private readonly subscriptions: { unsubscribe(): void }[] = [];
  private leaderSubscriptions: { unsubscribe(): void }[] = [];
  private election: LeaderElection | undefined;
  private loaded = { clusters: false, state: false, routes: false };
  private readonly planner: DebouncedRunner;
  private deadline: NodeJS.Timeout | undefined;
  private healthTicker: NodeJS.Timeout | undefined;
  private lastHealth = new Map<string, ClusterHealth>();
  /** When this instance last became leader (its clock). */
  private leaderSince = 0;

  constructor(private readonly c: HubCoreOptions) {
    this.planner = new DebouncedRunner({ delayMs: c.options.debounceMs, task: () => this.plan() });
  }

  private get logger(): Logger {
    return this.c.deps.logger;
  }

  start(): void {
    const { link, buckets, fleet } = this.c;
    const onChange = (): void => this.schedule();
    this.watches.push(
      watchKv({
        link,
        open: async () => buckets.clusters,
        key: '>',
        logger: this.logger,
        onEntry: (e) => {
          fleet.applyClusterEntry(e);
          onChange();
        },
        onCurrent: () => this.markLoaded('clusters'),
      }),
      watchKv({
        link,
        open: async () => buckets.state,
        key: [Keys.reportAll, Keys.handoverAll, Keys.ackAll],
        logger: this.logger,
        onEntry: (e) => {
          const acked = fleet.applyStateEntry(e);
          if (e.key.startsWith('report.') || (acked !== undefined && fleet.handovers.get(acked)?.record.pending.length)) onChange();
        },
        onCurrent: () => this.markLoaded('state'),
      }),
      watchKv({
        link,
        open: async () => buckets.routes,
        key: '>',
        logger: this.logger,
        onEntry: (e) => fleet.applyRouteEntry(e),
        onCurrent: () => this.markLoaded('routes'),
      }),
    );
    this.subscriptions.push(
      subscribeMessages({
        link,
        subject: Subjects.heartbeatAll,
        kind: Messages.heartbeat,
        logger: this.logger,
        handler: (hb, msg) => {
          if (msg.subject !== Subjects.heartbeat(hb.cluster)) return;
          fleet.lastSeen.set(hb.cluster, { at: this.c.now(), apiServerReachable: hb.apiServerReachable });
        },
      }),
      subscribeAcks({
        link,
        logger: this.logger,
        onAck: (ack) => {
          if (!fleet.recordAck(ack.operator, ack.shard, ack.version)) return;
          // Stored so that hubs started later (all restarted, or a new leader) complete handovers on it too,
          // rather than waiting for the proxies' lease to run out.
          if (this.isLeader()) {
            this.c.buckets.state
              .put(Keys.ack(ack.operator, ack.shard), encodeMessage(Messages.ack, ack))
              .catch((err: unknown) => this.logger.warn({ err, operator: ack.operator, shard: ack.shard }, 'could not store an acknowledgement'));
          }
          if (fleet.handovers.get(ack.operator)?.record.pending.length) this.schedule();
        },
      }),
    );
    this.healthTicker = setInterval(() => this.checkHealth(), 500);
    this.election = electLeader({
      kv: this.c.buckets.hub,
      identity: this.c.options.identity,
      renewMs: this.c.options.leaseRenewMs,
      ttlMs: this.c.options.leaseTtlMs,
      logger: this.logger,
      now: this.c.now,
      onChange: (leader) => this.onLeadership(leader),
      restoreBuckets: () => this.c.buckets.ensure(),
    });
  }

  isLeader(): boolean {
    return this.election?.isLeader() ?? false;
  }

  readiness(): { ready: boolean; reasons: string[] } {
    const reasons: string[] = [];
    if (this.c.link.state() !== 'connected') reasons.push(`NATS ${this.c.link.state()}`);
    for (const [part, done] of Object.entries(this.loaded)) if (!done) reasons.push(`loading ${part} from KV`);
    return { ready: reasons.length === 0, reasons };
  }

  status(): HubStatus {
    return hubStatus({
      fleet: this.c.fleet,
      identity: this.c.options.identity,
      leader: this.isLeader(),
      now: this.c.now(),
      health: this.c.options.health,
    });
  }

  async stop(releaseLease: boolean): Promise<void> {
    clearTimeout(this.deadline);
    clearInterval(this.healthTicker);
    for (const w of this.watches) w.stop();
    for (const s of [...this.subscriptions, ...this.leaderSubscriptions]) s.unsubscribe();
    await this.election?.stop({ release: releaseLease });
    await this.planner.stop();
  }

  private markLoaded(part: keyof HubCore['loaded']): void {
    if (this.loaded[part]) return;
    this.loaded[part] = true;
    this.logger.info({ part }, 'loaded from KV');
    this.schedule();
  }

  private health(): Map<string, ClusterHealth> {
    const now = this.c.now();
    const health = new Map<string, ClusterHealth>();
    for (const name of this.c.fleet.clusters.keys()) {
      health.set(name, clusterHealth(this.c.fleet.lastSeen.get(name), now, this.c.options.health));
    }
    return health;
  }

  private checkHealth(): void {
    const health = this.health();
    const counts: Record<ClusterHealth, number> = { Ready: 0, Unknown: 0, Offline: 0 };
    let changed = false;
    for (const [name, h] of health) {
      counts[h] += 1;
      if (this.lastHealth.get(name) !== h) {
        if (this.lastHealth.has(name)) this.logger.info({ cluster: name, health: h }, 'cluster health changed');
        changed = true;
      }
    }
    for (const [h, n] of Object.entries(counts)) this.c.metrics.clusters.set({ health: h }, n);
    this.lastHealth = health;
    if (changed) this.schedule();
  }

  private onLeadership(leader: boolean): void {
    this.c.metrics.leader.set(leader ? 1 : 0);
    for (const s of this.leaderSubscriptions) s.unsubscribe();
    this.leaderSubscriptions = [];
    if (!leader) return;
    this.leaderSince = this.c.now();
    const { link } = this.c;
    this.leaderSubscriptions.push(
      serveRenewals({
        link,
        signer: this.c.signer,
        logger: this.logger,
        published: (operator, shard) => this.c.fleet.routes.get(operator)?.get(shard)?.table.version ?? 0,
      }),
      subscribeMessages({
        link,
        subject: Subjects.register,
        kind: Messages.registerRequest,
        logger: this.logger,
        handler: (request, msg) => this.register(request, 'bootstrap', msg),
      }),
      subscribeMessages({
        link,
        subject: Subjects.registerAll,
        kind: Messages.registerRequest,
        logger: this.logger,
        handler: (request, msg) => {
          // Only the agent of a cluster may publish on its subject (its permissions): the subject is the proof.
          if (msg.subject === Subjects.registerAs(request.cluster.name)) return this.register(request, 'identity', msg);
          this.logger.warn({ subject: msg.subject, cluster: request.cluster.name }, 'dropped a registration whose cluster does not match its subject');
        },
      }),
      subscribeMessages({
        link,
        subject: Subjects.reportAll,
        kind: Messages.clusterReport,
        logger: this.logger,
        handler: (report, msg) => this.storeReport(report, msg.subject),
      }),
    );
    this.schedule();
  }

  private async register(request: RegisterRequest, channel: RegistrationChannel, msg: Msg): Promise<void> {
    const { fleet } = this.c;
    const name = request.cluster.name;
    const decision = decideRegistration({ request, channel, tokens: this.c.options.tokens, existing: fleet.clusters.get(name), now: new Date(this.c.now()) });
    if (decision.write === 'put') {
      await this.c.buckets.clusters.put(Keys.cluster(name), encodeMessage(Messages.clusterRecord, decision.record));
      fleet.clusters.set(name, decision.record);
      this.logger.info({ cluster: name, server: request.cluster.server, channel }, 'cluster registered');
    } else if (!decision.reply.ok) {
      this.logger.warn({ cluster: name, channel, reason: decision.reply.error }, 'registration refused');
    }
    this.c.metrics.registrations.inc({ result: !decision.reply.ok ? 'refused' : decision.write === 'put' ? 'accepted' : 'unchanged' });
    const issuer = this.c.options.agentIssuer;
    const jwt =
      decision.reply.ok && issuer && request.publicKey
        ? await mintUserJwt({ issuerSeed: issuer.seed, account: issuer.account, identity: { role: 'agent', cluster: name }, publicKey: request.publicKey })
        : undefined;
    respondMessage(msg, Messages.registerReply, { ...decision.reply, ...(jwt ? { jwt } : {}) });
  }

  private async storeReport(report: ClusterReport, subject: string): Promise<void> {
    const { fleet } = this.c;
    if (subject !== Subjects.report(report.cluster)) {
      this.logger.warn({ subject, cluster: report.cluster }, 'dropped a report whose cluster does not match its subject');
      return;
    }
    if (!fleet.clusters.has(report.cluster)) {
      this.logger.warn({ cluster: report.cluster }, 'dropped a report from an unregistered cluster');
      return;
    }
    const known = fleet.reports.get(report.cluster);
    if (known && sameReport(known, report)) return;
    await this.c.buckets.state.put(Keys.report(report.cluster), encodeMessage(Messages.clusterReport, report));
    fleet.reports.set(report.cluster, report);
    this.schedule();
  }

  /** Debounced: changes that arrive together are planned once. */
  private schedule(): void {
    if (this.isLeader()) this.planner.schedule();
  }

  private async plan(): Promise<void> {
    if (!this.isLeader() || Object.values(this.loaded).includes(false)) return;
    const started = performance.now();
    try {
      const plan = desiredPlan({
        clusters: new Map([...this.c.fleet.clusters].map(([name, r]) => [name, { labels: r.cluster.labels }])),
        reports: this.c.fleet.reports,
        health: this.health(),
        previous: intendedOwnership(this.c.fleet),
      });
      const result = await reconcile(
        {
          fleet: this.c.fleet,
          routes: this.c.buckets.routes,
          signer: this.c.signer,
          state: this.c.buckets.state,
          leaseSeconds: this.c.options.proxyLeaseSeconds,
          grantMarginMs: this.c.options.grantMarginMs,
          leaderSince: this.leaderSince,
          clock: this.c.now,
          historyLimit: this.c.options.handoverHistory,
          logger: this.logger,
          metrics: this.c.metrics,
          buckets: this.c.buckets,
        },
        plan,
        this.c.now(),
      );
      if (result.published.length) {
        this.logger.info(
          { tables: result.published.map((t) => `${t.operator}/${t.shard}@${t.version}`) },
          'published route tables',
        );
      }
      clearTimeout(this.deadline);
      if (result.nextDeadline !== undefined) {
        this.deadline = setTimeout(() => this.schedule(), Math.max(0, result.nextDeadline - this.c.now()) + 10);
      }
    } catch (err) {
      this.logger.error({ err }, 'planning failed; retrying on the next change');
    } finally {
      this.c.metrics.reconcileSeconds.observe((performance.now() - started) / 1000);
    }
  }
}

/** What each operator's shards were last meant to own: granted units plus those in flight to them. */
function intendedOwnership(fleet: Fleet): Map<string, Record<string, UnitKey[]>> {
  const out = new Map<string, Record<string, UnitKey[]>>();
  for (const [operator, { record }] of fleet.handovers) {
    const shards: Record<string, UnitKey[]> = Object.fromEntries(Object.entries(record.effective).map(([s, u]) => [s, [...u]]));
    for (const p of record.pending) if (p.to !== null) (shards[p.to] ??= []).push(p.unit);
    out.set(operator, shards);
  }
  return out;
}

function sameReport(a: ClusterReport, b: ClusterReport): boolean {
  return JSON.stringify({ ...a, sentAt: '' }) === JSON.stringify({ ...b, sentAt: '' });
}

