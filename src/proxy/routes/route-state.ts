import type { RouteTable } from '../../transport/index.js';
import type { ClusterLink } from '../upstream/index.js';
import type { ContinueTokens } from './continue-tokens.js';
import { LockRenamer } from './leader-election.js';
import { DEFAULT_MESH_SECRET, MeshObjects } from './mesh-objects.js';
import { ClusterShardView } from './shard-view.js';

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
   * Why the proxy cannot tell what its shard owns (fenced: its lease ran out, or no extension has reached this
   * process yet), or undefined when it can. Requests other than the shard's own leader-election lock are then answered
   * 503, never as a shard owning nothing: an informer re-listing a fenced proxy would take the empty answer as every
   * object deleted, and an operator starting beside it would list an empty shard and, if the first extension came
   * between its list and its watch, never see the objects that already exist (real-operator.test.ts, api-handler.test.ts).
   */
  readonly unsure: string | undefined;
  readonly clusters: ReadonlyMap<string, ClusterEntry>;
  readonly home: ClusterEntry | undefined;
  readonly renamer: LockRenamer | undefined;
  /** What belongs to the mesh, not to any shard: the operator namespace's credentials, pods and grants. */
  readonly mesh: MeshObjects;
  /** Seals the `continue` tokens of lists the proxy filtered (one key per process, whatever the table). */
  readonly continueTokens: ContinueTokens;

  constructor(options: {
    table: RouteTable;
    fenced: boolean;
    /** No lease extension has reached this process yet (only meaningful when fenced). */
    leasePending?: boolean;
    /** The name of the operator namespace's credential Secrets (`--mesh-secret`; default DEFAULT_MESH_SECRET). */
    meshSecret?: string;
    continueTokens: ContinueTokens;
    link: (route: RouteTable['clusters'][number]) => ClusterLink;
  }) {
    const { table, fenced, link } = options;
    this.table = table;
    this.fenced = fenced;
    this.unsure = !fenced
      ? undefined
      : options.leasePending === true
        ? 'the proxy is waiting for the hub to extend its lease; retry shortly'
        : 'the proxy is fenced: its lease from the hub ran out, so it cannot tell what its shard owns; retry shortly';
    // The operator runs, and elects its leader, in the namespace of its ShardingConfig (`<namespace>/<name>`).
    const operatorNamespace = table.operator.split('/')[0]!;
    this.renamer = table.leaderElectionName
      ? new LockRenamer({ leaderElectionName: table.leaderElectionName, shard: table.shard, namespace: operatorNamespace })
      : undefined;
    this.continueTokens = options.continueTokens;
    this.mesh = new MeshObjects({ namespace: operatorNamespace, meshSecret: options.meshSecret ?? DEFAULT_MESH_SECRET, locks: this.renamer });
    this.clusters = new Map(
      table.clusters.map((route) => [route.name, { ...link(route), view: new ClusterShardView({ table, route, fenced, hidden: this.mesh }) }]),
    );
    this.home = this.clusters.get(table.homeCluster);
  }
}
