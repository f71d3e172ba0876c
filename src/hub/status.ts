import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { ClusterHealth } from './health.js';
import type { Fleet } from './fleet.js';
import type { HandoverRecord } from '../transport/index.js';

export interface ClusterStatus {
  name: string;
  labels: Record<string, string>;
  server: string;
  health: ClusterHealth;
  lastHeartbeat: string | null;
  registeredAt: string;
  reportedAt: string | null;
}

export interface ShardStatus {
  name: string;
  version: number;
  acknowledgedVersion: number | null;
  homeCluster: string;
  /** Buckets owned, by cluster. */
  buckets: Record<string, number[]>;
}

export interface OperatorStatus {
  operator: string;
  shards: ShardStatus[];
  pending: HandoverRecord[];
  history: HandoverRecord[];
}

/** The JSON the status API serves and `ctrlmesh status` renders. */
export interface HubStatus {
  identity: string;
  leader: boolean;
  clusters: ClusterStatus[];
  /** Clusters removed from the fleet (`ctrlmesh clusters remove`), sorted: their registrations are refused. */
  removedClusters: string[];
  operators: OperatorStatus[];
}

export function hubStatus(options: { fleet: Fleet; identity: string; leader: boolean; health: ReadonlyMap<string, ClusterHealth> }): HubStatus {
  const { fleet } = options;
  const clusters = [...fleet.clusters.values()]
    .map(({ cluster, registeredAt }): ClusterStatus => {
      const seen = fleet.lastSeen.get(cluster.name);
      return {
        name: cluster.name,
        labels: cluster.labels,
        server: cluster.server,
        health: options.health.get(cluster.name) ?? 'Unknown',
        lastHeartbeat: seen ? new Date(seen.at).toISOString() : null,
        registeredAt,
        reportedAt: fleet.reports.get(cluster.name)?.sentAt ?? null,
      };
    })
    .sort((a, b) => (a.name < b.name ? -1 : 1));
  const operators = [...fleet.routes]
    .map(([operator, shards]): OperatorStatus => {
      const handover = fleet.handovers.get(operator)?.record;
      return {
        operator,
        shards: [...shards.values()]
          .map(({ table }) => ({
            name: table.shard,
            version: table.version,
            acknowledgedVersion: fleet.acks.get(operator)?.get(table.shard) ?? null,
            homeCluster: table.homeCluster,
            buckets: Object.fromEntries(table.clusters.map((c) => [c.name, c.buckets])),
          }))
          .sort((a, b) => (a.name < b.name ? -1 : 1)),
        pending: handover?.pending ?? [],
        history: handover?.history ?? [],
      };
    })
    .sort((a, b) => (a.operator < b.operator ? -1 : 1));
  return { identity: options.identity, leader: options.leader, clusters, removedClusters: [...fleet.removed].sort(), operators };
}

/**
 * Serves /status on `app`, behind the bearer token when one is given: a request without it gets 401, never the
 * fleet's clusters, API servers and operators (test/unit/hub/status-route.test.ts, 'answers 401 without the bearer
 * token, whatever else the request carries').
 */
export function registerStatusRoute(app: FastifyInstance, options: { status: () => HubStatus; token?: string }): void {
  const digest = (text: string): Buffer => createHash('sha256').update(text).digest();
  const expected = options.token === undefined ? undefined : digest(`Bearer ${options.token}`);
  app.get('/status', async (req, reply) => {
    // Digests of equal length, compared in constant time: the answer's timing says nothing of the token.
    if (expected && !timingSafeEqual(digest(req.headers.authorization ?? ''), expected)) {
      return reply.code(401).header('www-authenticate', 'Bearer realm="ctrlmesh-hub"').type('text/plain').send('a bearer token is required (ctrlmesh status --token-file)');
    }
    return options.status();
  });
}
