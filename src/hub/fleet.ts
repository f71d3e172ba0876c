import type { KvEntry } from '@nats-io/kv';
import type { Logger } from 'pino';
import {
  Buckets,
  Keys,
  type BucketName,
  Messages,
  decodeToken,
  receiveMessage,
  receiveRouteTable,
  type ClusterRecord,
  type Ack,
  type AgentKey,
  type ClusterReport,
  type HandoverStateRecord,
  type RouteTable,
} from '../transport/index.js';
import { reportProblem } from './report-check.js';

export interface PublishedRoute {
  table: RouteTable;
  /** KV revision of the key; 0 when the bucket was created again since (the next write creates the key). */
  revision: number;
  /** The bytes this hub wrote, when it published the table: reading them back needs no second verification. */
  sealed?: Uint8Array;
}

/** An operator's handover record and the KV revision it was read or written at. */
export interface KnownHandover {
  record: HandoverStateRecord;
  revision: number;
}

/** When the agent of a cluster was last heard from (the hub's clock), and what it said of its API server. */
export interface LastSeen {
  at: number;
  apiServerReachable: boolean;
}

/** A value that was stored malformed, as it was (to be copied aside). */
export interface CorruptEntry {
  key: string;
  revision: number;
  value: Uint8Array;
}

/**
 * What one hub knows of the fleet: the registry, the agents' latest reports, handovers and route tables (all read
 * back from KV, so every hub instance holds the same view), plus heartbeats and acknowledgements as they arrive.
 * The only writer of that state: everyone else reads it through the read-only views below and changes it through
 * the named methods, so each change has one place to look for.
 */
export class Fleet {
  readonly #clusters = new Map<string, ClusterRecord>();
  readonly #reports = new Map<string, ClusterReport>();
  /** The state-bucket revision of each report as the leader stored it, so that reading it back is no change. */
  readonly #reportRevisions = new Map<string, number>();
  readonly #handovers = new Map<string, KnownHandover>();
  readonly #routes = new Map<string, Map<string, PublishedRoute>>();
  /** The route tables being written, by routes key (see writingRoute). */
  readonly #writing = new Map<string, { table: RouteTable; sealed: Uint8Array }>();
  readonly #lastSeen = new Map<string, LastSeen>();
  readonly #acks = new Map<string, Map<string, number>>();
  /** The rules named by the latest acknowledgement of each shard (operator, then shard), as a comparable key. */
  readonly #ackRules = new Map<string, Map<string, string>>();
  readonly #corruptHandovers = new Map<string, CorruptEntry>();
  /** Clusters removed from the fleet (`ctrlmesh clusters remove`): never in `clusters`, whatever the registry holds. */
  readonly #removed = new Set<string>();
  /** The key each cluster's agent was last minted an identity for with its bootstrap token (registration.ts). */
  readonly #agentKeys = new Map<string, AgentKey>();

  /** The registered clusters, less the removed ones. */
  get clusters(): ReadonlyMap<string, ClusterRecord> {
    return this.#clusters;
  }

  get removed(): ReadonlySet<string> {
    return this.#removed;
  }

  get agentKeys(): ReadonlyMap<string, AgentKey> {
    return this.#agentKeys;
  }

  get reports(): ReadonlyMap<string, ClusterReport> {
    return this.#reports;
  }

  get handovers(): ReadonlyMap<string, KnownHandover> {
    return this.#handovers;
  }

  /** By operator, then shard. */
  get routes(): ReadonlyMap<string, ReadonlyMap<string, PublishedRoute>> {
    return this.#routes;
  }

  get lastSeen(): ReadonlyMap<string, LastSeen> {
    return this.#lastSeen;
  }

  /** Latest acknowledged version by operator, then shard. */
  get acks(): ReadonlyMap<string, ReadonlyMap<string, number>> {
    return this.#acks;
  }

  /**
   * Handover records stored malformed (or naming another operator), by operator: the leader copies each aside
   * and replaces it (reconciler.ts); its revision is kept so that the replacement's compare-and-set succeeds.
   */
  get corruptHandovers(): ReadonlyMap<string, CorruptEntry> {
    return this.#corruptHandovers;
  }

  /** `trusted`: the route-signing keys whose tables are read back (the hubs'). */
  constructor(
    private readonly logger: Logger,
    private readonly trusted: readonly string[],
  ) {}

  applyClusterEntry(entry: KvEntry): void {
    const name = decodeToken(entry.key);
    if (name === undefined) return;
    if (entry.operation !== 'PUT') {
      this.#clusters.delete(name);
      return;
    }
    const record = receiveMessage(Messages.clusterRecord, entry.value, this.source(Buckets.clusters, entry));
    // A record written after the removal (a registration that raced it) counts for nothing.
    if (record && record.cluster.name === name && !this.#removed.has(name)) this.#clusters.set(name, record);
  }

  /** Returns the operator when the entry is an acknowledgement newer than the one known. */
  applyStateEntry(entry: KvEntry): string | undefined {
    if (entry.key.startsWith('ack.')) return this.applyAckEntry(entry);
    const [prefix, token] = entry.key.split('.', 2);
    const name = token === undefined ? undefined : decodeToken(token);
    if (name === undefined) return undefined;
    if (prefix === 'removed') {
      if (entry.operation === 'PUT') {
        // Any value under the key removes: one that does not read as this cluster's removal (corrupted, or written
        // by a hub's answer aimed at the key) fails closed, until readmit deletes it (test/unit/hub/fleet-removal.test.ts).
        const removal = receiveMessage(Messages.clusterRemoval, entry.value, this.source(Buckets.state, entry));
        if (removal !== undefined && removal.cluster !== name) this.logger.warn({ source: `${Buckets.state}/${entry.key}`, cluster: removal.cluster }, 'a removal record names another cluster: counted as a removal of its key\'s');
        this.#removed.add(name);
        this.#clusters.delete(name);
        this.#reports.delete(name);
      } else {
        // Readmitted: the cluster is back once its agent registers again (its record was deleted with the removal).
        this.#removed.delete(name);
      }
    } else if (prefix === 'report') {
      if (entry.operation !== 'PUT') this.#reports.delete(name);
      else {
        const report = receiveMessage(Messages.clusterReport, entry.value, this.source(Buckets.state, entry));
        // Stored before the hub checked reports on arrival, perhaps: read back under the same check.
        if (report && report.cluster === name && reportProblem(report) === undefined && !this.#removed.has(name)) this.#reports.set(name, report);
      }
    } else if (prefix === 'agentkey') {
      const bound = entry.operation === 'PUT' ? receiveMessage(Messages.agentKey, entry.value, this.source(Buckets.state, entry)) : undefined;
      // Deleted, malformed or naming another cluster: no key is bound, and the next renewal binds its own.
      if (bound?.cluster === name) this.#agentKeys.set(name, bound);
      else this.#agentKeys.delete(name);
    } else if (prefix === 'handover') {
      this.#corruptHandovers.delete(name);
      if (entry.operation !== 'PUT') this.#handovers.delete(name);
      else {
        const record = receiveMessage(Messages.handoverState, entry.value, this.source(Buckets.state, entry));
        if (record && record.operator === name) this.#handovers.set(name, { record, revision: entry.revision });
        else {
          // Logged by receiveMessage when malformed. Dropping it and keeping the old revision would wedge the
          // operator (every compare-and-set fails): the leader rebuilds the record from the route tables instead.
          if (record) this.logger.warn({ source: `${Buckets.state}/${entry.key}`, operator: record.operator }, 'dropped a handover record naming another operator');
          this.#handovers.delete(name);
          this.#corruptHandovers.set(name, { key: entry.key, revision: entry.revision, value: entry.value });
        }
      }
    }
    return undefined;
  }

  /** Acknowledgements the leader stored, so a restarted hub still knows which proxies applied which version. */
  private applyAckEntry(entry: KvEntry): string | undefined {
    if (entry.operation !== 'PUT') return undefined;
    const ack = receiveMessage(Messages.ack, entry.value, this.source(Buckets.state, entry));
    if (!ack || entry.key !== Keys.ack(ack.operator, ack.shard)) return undefined;
    return this.recordAck(ack.operator, ack.shard, ack.version, ack.rules) ? ack.operator : undefined;
  }

  applyRouteEntry(entry: KvEntry): void {
    if (entry.operation !== 'PUT') return;
    // The leader's own write, read back before the write's answer came: known as it will be once answered.
    const writing = this.#writing.get(entry.key);
    if (writing && Buffer.from(writing.sealed).equals(entry.value)) return this.recordRoute(writing.table, entry.revision, writing.sealed);
    const at = this.routeAt(entry.key);
    // The leader's own write read back, exactly the bytes it published under this key: no second verification
    // (about 0.3 ms of verification and decoding per table); its revision is learned all the same.
    if (at?.known.sealed && Buffer.from(at.known.sealed).equals(entry.value)) return this.learnRevision(at, entry.revision);
    const table = receiveRouteTable(entry.value, { ...this.source(Buckets.routes, entry), trusted: this.trusted });
    if (!table || entry.key !== Keys.route(table.operator, table.shard)) {
      // Not ours (unsigned, another key, another shard's): keep the last good table, but learn the key's revision,
      // so the next compare-and-set publish overwrites it instead of failing on it forever.
      if (at) this.learnRevision(at, entry.revision);
      return;
    }
    const shards = this.#routes.get(table.operator) ?? new Map<string, PublishedRoute>();
    this.#routes.set(table.operator, shards);
    const known = shards.get(table.shard);
    // A greater version at a lower revision is a table published into a bucket created again (revisions restart).
    if (!known || known.revision < entry.revision || known.table.version < table.version) shards.set(table.shard, { table, revision: entry.revision });
  }

  /** The table known under a routes key, and the map that holds it. */
  private routeAt(key: string): { shards: Map<string, PublishedRoute>; shard: string; known: PublishedRoute } | undefined {
    const [operator, shard] = key.split('.').map(decodeToken);
    const shards = operator === undefined ? undefined : this.#routes.get(operator);
    const known = shard === undefined ? undefined : shards?.get(shard);
    return shards && known && shard !== undefined ? { shards, shard, known } : undefined;
  }

  /** A newer KV revision of a known key, its table kept as it is. */
  private learnRevision(at: { shards: Map<string, PublishedRoute>; shard: string; known: PublishedRoute }, revision: number): void {
    if (at.known.revision < revision) at.shards.set(at.shard, { ...at.known, revision });
  }

  /** A heartbeat received (heartbeats are not stored: each hub times them on its own clock). */
  recordHeartbeat(cluster: string, seen: LastSeen): void {
    this.#lastSeen.set(cluster, seen);
  }

  /** A registration the leader has just stored. */
  recordRegistration(record: ClusterRecord): void {
    if (!this.#removed.has(record.cluster.name)) this.#clusters.set(record.cluster.name, record);
  }

  /** The key the leader has just bound a cluster's agent to. */
  recordAgentKey(bound: AgentKey): void {
    this.#agentKeys.set(bound.cluster, bound);
  }

  /** A report the leader has just stored at `revision`. */
  recordReport(report: ClusterReport, revision: number): void {
    if (this.#removed.has(report.cluster)) return;
    this.#reports.set(report.cluster, report);
    this.#reportRevisions.set(report.cluster, revision);
  }

  /**
   * Whether a state entry is a report this hub already holds at that revision or a later one: the leader's own
   * write read back, or an older one a lagging watch delivers late. Nothing to apply, and no reason to plan.
   */
  holdsReport(entry: KvEntry): boolean {
    if (!entry.key.startsWith('report.')) return false;
    const name = decodeToken(entry.key.slice('report.'.length));
    const known = name === undefined ? undefined : this.#reportRevisions.get(name);
    return known !== undefined && known > 0 && entry.revision <= known;
  }

  /** A handover record the leader has just stored at `revision`: it replaces a malformed one, if any. */
  recordHandover(record: HandoverStateRecord, revision: number): void {
    this.#handovers.set(record.operator, { record, revision });
    this.#corruptHandovers.delete(record.operator);
  }

  /**
   * A route table the leader is writing, as the bytes it sends (`sealed`), until the returned function is called:
   * the watch of the routes bucket often delivers the write before its answer comes, and then needs no verification.
   */
  writingRoute(table: RouteTable, sealed: Uint8Array): () => void {
    const key = Keys.route(table.operator, table.shard);
    const writing = { table, sealed };
    this.#writing.set(key, writing);
    return () => {
      if (this.#writing.get(key) === writing) this.#writing.delete(key);
    };
  }

  /** A route table the leader has just published at `revision`, as the bytes it wrote (`sealed`). */
  recordRoute(table: RouteTable, revision: number, sealed?: Uint8Array): void {
    const shards = this.#routes.get(table.operator) ?? new Map<string, PublishedRoute>();
    this.#routes.set(table.operator, shards);
    const known = shards.get(table.shard);
    if (!known || known.revision < revision) shards.set(table.shard, { table, revision, ...(sealed ? { sealed } : {}) });
  }

  /**
   * Records an acknowledgement; false when it is neither newer than the one known nor the same version naming other
   * cluster rules (`rules`: a proxy whose pod labels changed acknowledges its table again), or when it acknowledges
   * a version above the one published for its shard (logged: no proxy can have applied it, so it would grant early).
   * An ack for a shard whose table is not known yet (read back from KV before the tables) is recorded and judged
   * when used.
   */
  recordAck(operator: string, shard: string, version: number, rules?: Ack['rules']): boolean {
    const published = this.#routes.get(operator)?.get(shard)?.table.version;
    if (published !== undefined && version > published) {
      this.logger.warn({ operator, shard, version, published }, 'ignored an acknowledgement of a version above the one published for its shard');
      return false;
    }
    const shards = this.#acks.get(operator) ?? new Map<string, number>();
    this.#acks.set(operator, shards);
    const ruleKeys = this.#ackRules.get(operator) ?? new Map<string, string>();
    this.#ackRules.set(operator, ruleKeys);
    const known = shards.get(shard) ?? -1;
    const ruleKey = JSON.stringify(rules ?? []);
    if (known > version || (known === version && ruleKeys.get(shard) === ruleKey)) return false;
    shards.set(shard, version);
    ruleKeys.set(shard, ruleKey);
    return true;
  }

  /**
   * The bucket was created again (deleted under a running hub): every revision known in it is void, so the next
   * writes create their keys instead of failing a compare-and-set forever. What it held is kept in memory.
   */
  forgetRevisions(bucket: BucketName): void {
    if (bucket === Buckets.routes) {
      for (const shards of this.#routes.values()) for (const [shard, route] of shards) shards.set(shard, { ...route, revision: 0 });
    } else if (bucket === Buckets.state) {
      for (const [operator, handover] of this.#handovers) this.#handovers.set(operator, { ...handover, revision: 0 });
      this.#reportRevisions.clear();
      this.#corruptHandovers.clear();
    }
  }

  private source(bucket: string, entry: KvEntry): { logger: Logger; source: string } {
    return { logger: this.logger, source: `${bucket}/${entry.key}` };
  }
}
