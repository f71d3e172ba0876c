import Fastify from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { createHubMetrics, createRegistry, registerOpsRoutes } from '../metrics/index.js';
import { createHashSettings } from '../sharding/index.js';
import { connectNats, createKeptBuckets, routeSigner } from '../transport/index.js';
import { Fleet } from './fleet.js';
import { createHealthWatch } from './health-watch.js';
import { createHubInputs } from './hub-inputs.js';
import { createLeaderDuties } from './leader-duties.js';
import { electLeader, type LeaderElection } from './leader.js';
import type { HubOptions } from './options.js';
import { createPlanningLoop } from './planning-loop.js';
import { hubStatus, registerStatusRoute, type HubStatus } from './status.js';

export interface HubDependencies {
  logger: Logger;
  registry?: Registry;
  /** Wall time: what people read, what is stored, table versions. */
  now?: () => number;
  /** What every lease and deadline is timed on (default performance.now): a wall-clock step moves none. */
  monotonic?: () => number;
}

export interface HubHandle {
  identity: string;
  /** Base URL of /healthz, /readyz and /metrics. */
  url: string;
  /** Base URL of /status: `url` itself unless the options give /status a listener of its own. */
  statusUrl: string;
  isLeader(): boolean;
  status(): HubStatus;
  /** Stops; `releaseLease: false` behaves like a crash for the standby (it waits for the lease to expire). */
  stop(options?: { releaseLease?: boolean }): Promise<void>;
}

/**
 * Starts one hub instance: leader or hot standby, decided by the lease in KV. Every instance reads the fleet
 * (hub-inputs.ts) and its clusters' health (health-watch.ts); the leader alone serves agents and proxies
 * (leader-duties.ts) and plans (planning-loop.ts). This function only wires them to each other and to the
 * ops server.
 */
export async function startHub(options: HubOptions, deps: HubDependencies): Promise<HubHandle> {
  const logger = deps.logger.child({ component: 'hub', identity: options.identity });
  const now = deps.now ?? Date.now;
  const monotonic = deps.monotonic ?? (() => performance.now());
  const registry = deps.registry ?? createRegistry('hub');
  const metrics = createHubMetrics(registry);
  const signer = routeSigner(options.signingSeed);
  const link = await connectNats({ config: options.nats, name: `ctrlmesh-hub-${options.identity}`, logger });
  const buckets = await createKeptBuckets({ js: link.js, replicas: options.replicas, leaseTtlMs: options.leaseTtlMs, logger });
  const fleet = new Fleet(logger, [signer.publicKey]);

  // The election starts last, once the rest is up: until then this instance is no leader.
  const leadership: { election?: LeaderElection } = {};
  const isLeader = (): boolean => leadership.election?.isLeader() ?? false;
  const changed = (): void => planning.schedule();
  /** When this hub subscribed to heartbeats: the silence of a cluster it has not heard from is counted from then. */
  const listening: { since?: number } = {};
  const health = createHealthWatch({ fleet, thresholds: options.health, metrics, logger, now, listeningSince: () => listening.since, changed });
  const inputs = createHubInputs({ link, buckets, fleet, logger, now, changed, acknowledged: (ack) => duties.storeAck(ack) });
  // The fleet's hash settings, where the hub was given them: what reports are checked against and plans made with.
  const fleetHash = options.hash === undefined ? undefined : createHashSettings(options.hash);
  const duties = createLeaderDuties({ ...options, fleetHash, link, buckets, fleet, signer, metrics, logger, now, isLeader, loaded: inputs.loaded, changed });
  const planning = createPlanningLoop({ ...options, fleetHash, fleet, buckets, signer, metrics, logger, now, monotonic, isLeader, loaded: inputs.loaded, health: health.current });
  const status = (): HubStatus => hubStatus({ fleet, identity: options.identity, leader: isLeader(), health: health.current() });

  // A scrape or status call answered during stop would otherwise hold the port until its keep-alive timeout (72 s).
  const server = Fastify({ logger: false, forceCloseConnections: true });
  registerOpsRoutes(server, { registry, readiness: inputs.readiness });
  const statusRoute = { status, ...(options.statusToken === undefined ? {} : { token: options.statusToken }) };
  const statusServer = options.statusListen ? Fastify({ logger: false, forceCloseConnections: true }) : server;
  registerStatusRoute(statusServer, statusRoute);
  const address = await server.listen({ host: options.listen.host, port: options.listen.port });
  const statusAddress = options.statusListen
    ? await statusServer.listen({ host: options.statusListen.host, port: options.statusListen.port }).catch(async (err: unknown) => {
        await server.close();
        throw err;
      })
    : address;
  logger.info({ url: address, statusUrl: statusAddress, statusToken: options.statusToken !== undefined }, 'hub ops and status API listening');

  inputs.start();
  listening.since = now();
  health.start();
  leadership.election = electLeader({
    kv: buckets.hub,
    identity: options.identity,
    renewMs: options.leaseRenewMs,
    ttlMs: options.leaseTtlMs,
    logger,
    now,
    monotonic,
    onChange: (leader) => {
      metrics.leader.set(leader ? 1 : 0);
      duties.end();
      if (!leader) return;
      planning.becameLeader();
      duties.begin();
    },
    restoreBuckets: () => buckets.ensure(),
  });
  return {
    identity: options.identity,
    url: address,
    statusUrl: statusAddress,
    isLeader,
    status,
    async stop(stopOptions = {}) {
      // Timers and inputs first, so nothing new is planned; the lease next; a pass under way is waited for last.
      planning.cancelDeadline();
      health.stop();
      inputs.stop();
      duties.end();
      await leadership.election?.stop({ release: stopOptions.releaseLease ?? true });
      await planning.stop();
      await server.close();
      if (statusServer !== server) await statusServer.close();
      await link.close();
    },
  };
}
