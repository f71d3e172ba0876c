import type { Logger } from 'pino';
import {
  Keys,
  Messages,
  Subjects,
  peerDrops,
  serveWatches,
  subscribeAcks,
  subscribeMessages,
  watchKv,
  type Ack,
  type KeptBuckets,
  type NatsLink,
  type Watch,
} from '../transport/index.js';
import type { Fleet } from './fleet.js';
import { LatestProofs, proofDropped } from './signed-messages.js';

export interface HubInputsOptions {
  link: NatsLink;
  buckets: Pick<KeptBuckets, 'clusters' | 'state' | 'routes'>;
  fleet: Fleet;
  logger: Logger;
  now: () => number;
  /** Called when what was read may change the plan. */
  changed: () => void;
  /** Called with each acknowledgement newer than the one known (or naming other rules), once the fleet has it. */
  acknowledged: (ack: Ack) => void;
}

export interface HubInputs {
  start(): void;
  stop(): void;
  /** Whether every bucket has been read up to its current values: planning from less would undo what is there. */
  loaded(): boolean;
  readiness(): { ready: boolean; reasons: string[] };
}

/**
 * What every hub instance reads, leader or standby, into its Fleet: the registry, reports, handover records,
 * stored acknowledgements and route tables from KV, and the heartbeats and acknowledgements as they are sent. A
 * standby holding the same view can take over at once. Every instance also opens the agents' and proxies' KV feeds.
 */
export function createHubInputs(options: HubInputsOptions): HubInputs {
  const { link, buckets, fleet, logger, now, changed, acknowledged } = options;
  const watches: Watch[] = [];
  const subscriptions: { unsubscribe(): void }[] = [];
  const loaded = { clusters: false, state: false, routes: false };
  const heartbeatProofs = new LatestProofs(now);

  const markLoaded = (part: keyof typeof loaded): void => {
    if (loaded[part]) return;
    loaded[part] = true;
    logger.info({ part }, 'loaded from KV');
    changed();
  };

  const start = (): void => {
    watches.push(
      watchKv({
        link,
        open: async () => buckets.clusters,
        key: '>',
        logger,
        onEntry: (e) => {
          fleet.applyClusterEntry(e);
          changed();
        },
        onCurrent: () => markLoaded('clusters'),
      }),
      watchKv({
        link,
        open: async () => buckets.state,
        key: [Keys.reportAll, Keys.handoverAll, Keys.ackAll, Keys.removalAll, Keys.agentKeyAll],
        logger,
        onEntry: (e) => {
          // The leader planned when it stored the report: its echo would only earn a pass that changes nothing.
          if (fleet.holdsReport(e)) return;
          const acked = fleet.applyStateEntry(e);
          if (e.key.startsWith('report.') || e.key.startsWith('removed.') || (acked !== undefined && fleet.handovers.get(acked)?.record.pending.length)) changed();
        },
        onCurrent: () => markLoaded('state'),
      }),
      watchKv({
        link,
        open: async () => buckets.routes,
        key: '>',
        logger,
        onEntry: (e) => fleet.applyRouteEntry(e),
        onCurrent: () => markLoaded('routes'),
      }),
    );
    subscriptions.push(
      // Agents and proxies read KV only through feeds a hub opens for them: any hub, so a standby serves them too.
      serveWatches({ link, logger }),
      subscribeMessages({
        link,
        subject: Subjects.heartbeatAll,
        kind: Messages.heartbeat,
        logger,
        handler: (hb, msg) => {
          if (msg.subject !== Subjects.heartbeat(hb.cluster)) return;
          // A copy of the cluster's identity could otherwise keep its cluster Ready after the agent is gone.
          const verdict = heartbeatProofs.judge(fleet.agentKeys.get(hb.cluster), msg);
          if (verdict !== 'counts') {
            peerDrops.warn(logger, `heartbeat ${verdict} ${msg.subject}`, { cluster: hb.cluster }, proofDropped('heartbeat', verdict));
            return;
          }
          fleet.recordHeartbeat(hb.cluster, { at: now(), apiServerReachable: hb.apiServerReachable });
        },
      }),
      subscribeAcks({
        link,
        logger,
        onAck: (ack) => {
          // A shard's first ack says it serves: the moves waiting for it can start (handover.ts).
          const first = fleet.acks.get(ack.operator)?.get(ack.shard) === undefined;
          // A newer version, or the same one naming other rules (stored so the agents can write the rules' status).
          if (!fleet.recordAck(ack.operator, ack.shard, ack.version, ack.rules)) return;
          acknowledged(ack);
          if (first || fleet.handovers.get(ack.operator)?.record.pending.length) changed();
        },
      }),
    );
  };

  return {
    start,
    stop: () => {
      for (const w of watches) w.stop();
      for (const s of subscriptions) s.unsubscribe();
    },
    loaded: () => !Object.values(loaded).includes(false),
    readiness: () => {
      const reasons: string[] = [];
      if (link.state() !== 'connected') reasons.push(`NATS ${link.state()}`);
      for (const [part, done] of Object.entries(loaded)) if (!done) reasons.push(`loading ${part} from KV`);
      return { ready: reasons.length === 0, reasons };
    },
  };
}
