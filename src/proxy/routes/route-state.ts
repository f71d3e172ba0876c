import type CircuitBreaker from 'opossum';
import type { RouteTable } from '../../transport/index.js';
import type { Forward } from '../upstream/cluster-breaker.js';
import type { ClusterMetrics } from '../upstream/cluster-metrics.js';
import type { ClusterUpstream } from '../upstream/upstream.js';
import { LockRenamer } from './leader-election.js';
import { ClusterShardView } from './shard-view.js';

/** A cluster's connection and breaker, kept across route tables while the cluster's address is unchanged. */
export interface ClusterLink {
  upstream: ClusterUpstream;
  breaker: CircuitBreaker<[Forward], void>;
  metrics: ClusterMetrics;
}

export interface ClusterEntry extends ClusterLink {
  view: ClusterShardView;
}

/**
 * Everything derived from one route table, built once when the table (or the fencing) changes so the request
 * path only looks things up: per-cluster views, links, the lock renamer.
 */
export class RouteState {
  readonly table: RouteTable;
  readonly fenced: boolean;
  /**
   * Fenced because no lease extension has reached this process yet (it is starting): requests are answered 503, not
   * as a shard owning nothing. An operator starting beside the proxy would otherwise list an empty shard and, if the
   * first extension came between its list and its watch, watch from that list's version under the wider selector and
   * never see the objects that already exist.
   */
  readonly leasePending: boolean;
  readonly clusters: ReadonlyMap<string, ClusterEntry>;
  readonly home: ClusterEntry | undefined;
  readonly renamer: LockRenamer | undefined;

  constructor(options: {
    table: RouteTable;
    fenced: boolean;
    /** No lease extension has reached this process yet (only meaningful when fenced). */
    leasePending?: boolean;
    link: (route: RouteTable['clusters'][number]) => ClusterLink;
  }) {
    const { table, fenced, link } = options;
    this.table = table;
    this.fenced = fenced;
    this.leasePending = fenced && options.leasePending === true;
    this.clusters = new Map(
      table.clusters.map((route) => [route.name, { ...link(route), view: new ClusterShardView({ table, route, fenced }) }]),
    );
    this.home = this.clusters.get(table.homeCluster);
    // The operator runs, and elects its leader, in the namespace of its ShardingConfig (`<namespace>/<name>`).
    const operatorNamespace = table.operator.split('/')[0]!;
    this.renamer = table.leaderElectionName
      ? new LockRenamer({ leaderElectionName: table.leaderElectionName, shard: table.shard, namespace: operatorNamespace })
      : undefined;
  }
}
