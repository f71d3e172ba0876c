import type { Logger } from 'pino';
import type { ProxyMetrics } from '../../metrics/index.js';
import type { AckRule, RouteTable } from '../../transport/index.js';
import { randomBytes } from 'node:crypto';
import type { ClusterLinks } from '../upstream/index.js';
import { ContinueTokens } from './continue-tokens.js';
import { LogThrottle } from '../../runtime/log-throttle.js';
import { leaseExpired } from './fencing.js';
import { systemLeaseClock, type LeaseClock } from './lease-clock.js';
import { InflightWrites } from './inflight-writes.js';
import type { RouteSource } from './route-source.js';
import { RouteState } from './route-state.js';
import { tableRefusal } from './table-admission.js';
import type { StoredTable, TableStore } from './table-store.js';
import { SessionRegistry, type OpenSession } from './session-registry.js';
import type { EndReason } from './open-streams.js';
import { WatchRegistry, type OpenWatch } from './watch-registry.js';

export interface RouteControllerOptions {
  source: RouteSource;
  store: TableStore;
  /** Per-cluster pools and breakers; consulted only when a table or the fencing changes. */
  links: ClusterLinks;
  metrics: ProxyMetrics;
  logger: Logger;
  /** Wall time: for what people read (metrics, the stored `contactAt`) and a table's version sanity check only. */
  now: () => number;
  /** What the lease is judged by (default CLOCK_MONOTONIC and this boot); the live source's `askedAt` is on it too. */
  leaseClock?: LeaseClock;
  /** How often the lease is checked. */
  tickMs?: number;
  /** The proxy fences itself this long before its lease ends (clock-rate safety; the hub adds its own margin). */
  leaseMarginMs?: number;
  /** The operator namespace's credential Secrets (`--mesh-secret`): every table's MeshObjects hide them. */
  meshSecret?: string;
  /** Told of every table installed (stored, live, fenced or not), e.g. to keep the operator's kubeconfig. */
  onInstalled?: (table: RouteTable) => void;
  /** The cluster rules of a table in force on this proxy, named in its acknowledgement (default none). */
  appliedRules?: (table: RouteTable) => AckRule[];
}

/** A table's store and acknowledgement are retried from this wait, doubling, to at most RETRY_MAX_MS apart. */
const RETRY_FIRST_MS = 250;
const RETRY_MAX_MS = 5_000;

/**
 * Applies route tables as they come (only newer versions), keeps the last one on disk, ends the watches a
 * change invalidates, waits for the writes admitted under the previous table to be answered and then
 * acknowledges, and fences the proxy when a leased source is out of contact for
 * longer than the table's lease.
 */
export class RouteController {
  private readonly openWatches = new WatchRegistry();
  private readonly openSessions = new SessionRegistry();
  /** Writes forwarded and not answered yet (the request path registers them through trackWrite). */
  private readonly inflightWrites = new InflightWrites();
  private state: RouteState | undefined;
  /** This proxy's monotonic clock before it asked for the last lease extension it got (undefined: none it trusts). */
  private extendedAt: number | undefined;
  /** Whether the live source has extended the lease since this process started (a stored extension does not count). */
  private extendedLive = false;
  private savedExtendedAt: number | undefined;
  private readonly clock: LeaseClock;
  /** The version last acknowledged (0: none yet). */
  private acknowledged = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** The periodic store of a lease extension fails on every tick while its cause lasts: logged once a minute a cause. */
  private readonly storeFailures = new LogThrottle(60_000, () => performance.now());
  private readonly options: RouteControllerOptions;
  private readonly continueTokens = new ContinueTokens({ key: randomBytes(32), randomBytes });

  constructor(options: RouteControllerOptions) {
    this.options = options;
    this.clock = options.leaseClock ?? systemLeaseClock();
  }

  get current(): RouteState | undefined {
    return this.state;
  }

  /** The watches open through the proxy (read-only: the request path opens them with registerWatch). */
  get watches(): { readonly size: number } {
    return this.openWatches;
  }

  /** The upgraded sessions, answered or not (read-only: the upgrade path opens them with registerSession). */
  get sessions(): { readonly size: number } {
    return this.openSessions;
  }

  /** The writes forwarded and not answered yet (read-only: the request path registers them with trackWrite). */
  get writes(): { readonly size: number } {
    return this.inflightWrites;
  }

  /**
   * Registers an open watch, so a table that revokes a unit it carries ends it; returns its unregistration. A watch
   * judged under an earlier table than the current one is held to the current one at once (ended, or retargeted).
   */
  registerWatch(watch: OpenWatch): () => void {
    return this.openWatches.add(watch, this.state, this.countEnded);
  }

  private readonly countEnded = (watch: OpenWatch, reason: EndReason): void => {
    this.options.metrics.watchesEnded.inc({ cluster: watch.cluster, reason });
  };

  /**
   * Registers an upgraded session from its judgement on (its request may still be on its way to the API server), so
   * a table under which its request would be refused ends it before that table is acknowledged; returns its
   * unregistration.
   */
  registerSession(session: OpenSession): () => void {
    return this.openSessions.add(session, this.state, this.logSessionEnded);
  }

  private readonly logSessionEnded = (session: OpenSession, reason: EndReason): void => {
    this.options.logger.info({ cluster: session.cluster, reason }, 'upgraded session (exec, attach, port-forward) ended by a route table');
  };

  /**
   * Registers a forwarded write; returns it unchanged. A table installed later is acknowledged only once the writes
   * admitted before it are answered.
   */
  trackWrite<T>(write: Promise<T>): Promise<T> {
    return this.inflightWrites.track(write);
  }

  /**
   * Acknowledges the current table again when it has been acknowledged already: the cluster rules in force from it
   * changed (the pod's labels did). A table not acknowledged yet names the rules in force when it is.
   */
  reacknowledge(): void {
    const table = this.state?.table;
    if (table === undefined || table.version !== this.acknowledged) return;
    const sent = this.options.source.acknowledge?.(table, this.options.appliedRules?.(table));
    sent?.catch((err: unknown) => this.options.logger.error({ err, version: table.version }, 'cannot acknowledge the route table again'));
  }

  /** Loads the stored table (if any), then starts the live source; a source that fails to start leaves the stored table serving. */
  async start(): Promise<void> {
    const { source, store, logger } = this.options;
    const loaded = await store.load();
    const refusal = loaded && tableRefusal(loaded.table, this.options.now());
    if (refusal) logger.error({ path: store.path, reason: refusal }, 'the stored route table is refused; waiting for the live source');
    const stored = refusal ? undefined : loaded;
    if (stored) {
      this.extendedAt = this.trustedStoredExtension(stored.lease);
      this.savedExtendedAt = this.extendedAt;
      this.install(stored.table, 'stored');
      if (this.extendedAt === undefined && source.leased) {
        logger.warn(
          { version: stored.table.version, path: store.path, contactAt: new Date(stored.contactAt).toISOString() },
          'the stored lease extension is not on this boot\'s monotonic clock: fenced until the live source extends the lease',
        );
      } else logger.info({ version: stored.table.version, path: store.path }, 'serving the stored route table until the live source answers');
    }
    this.timer = setInterval(() => this.tick(), this.options.tickMs ?? 1000);
    this.timer.unref();
    try {
      await source.start({
        onTable: (table) => this.onTable(table),
        onContact: (connected) => this.onContact(connected),
        onRenewal: (askedAt) => this.onRenewal(askedAt),
      });
    } catch (err) {
      if (!stored) throw err;
      logger.error({ err, source: source.description }, 'route source unavailable; serving the stored table');
    }
    this.tick();
  }

  /**
   * The stored extension, on this process's monotonic clock, or undefined. Only a reading of the same boot's
   * CLOCK_MONOTONIC is counted on (time the process was down is then counted as spent); a wall-clock `contactAt`
   * never is, since the wall clock may have stepped back since (route-controller.test.ts, "a stored extension").
   */
  private trustedStoredExtension(lease: StoredTable['lease']): number | undefined {
    const { boot } = this.clock;
    if (lease === undefined || boot === undefined || lease.boot !== boot) return undefined;
    return lease.monotonicAt <= this.clock.monotonic() ? lease.monotonicAt : undefined;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.options.source.stop();
    await this.options.store.idle();
  }

  readiness(): { ready: boolean; reasons: string[] } {
    if (this.state === undefined) return { ready: false, reasons: [`no route table yet from ${this.options.source.description}`] };
    if (this.state.fenced) {
      const since = this.extendedAt === undefined ? 'no lease extension yet' : `no lease extension for ${Math.round((this.clock.monotonic() - this.extendedAt) / 1000)}s`;
      return {
        ready: false,
        reasons: [`fenced: ${since} from ${this.options.source.description} (lease ${this.state.table.leaseSeconds}s); serving no buckets`],
      };
    }
    return { ready: true, reasons: [] };
  }

  private onTable(table: RouteTable): void {
    const current = this.state?.table;
    if (current && (table.operator !== current.operator || table.shard !== current.shard)) {
      this.options.logger.error({ operator: table.operator, shard: table.shard }, 'route table for another shard ignored');
      return;
    }
    // The live copy of the table read from the store at start: nothing to install, but the hub needs its
    // acknowledgement, without which it extends no lease and this proxy would fence until a newer table came.
    if (current && table.version === current.version && this.acknowledged < table.version && sameTable(table, current)) {
      void this.persistAndAcknowledge(current, this.inflightWrites.drained());
      return;
    }
    if (current && table.version <= current.version) return;
    const refusal = tableRefusal(table, this.options.now());
    if (refusal) {
      this.options.logger.error({ version: table.version, reason: refusal }, 'route table refused; keeping the current one');
      return;
    }
    this.install(table, 'live');
    // Taken now: the writes admitted from here on were judged by this table.
    void this.persistAndAcknowledge(table, this.inflightWrites.drained());
  }

  private onContact(connected: boolean): void {
    this.options.metrics.natsConnected.set(connected ? 1 : 0);
    this.options.logger[connected ? 'info' : 'warn']({ source: this.options.source.description }, connected ? 'route source in contact' : 'route source lost');
  }

  private onRenewal(askedAt: number): void {
    if (this.extendedAt !== undefined && askedAt <= this.extendedAt) return;
    this.extendedAt = askedAt;
    this.extendedLive = true;
    this.tick();
  }

  /**
   * Whether the table a request was judged by still holds, by the clock, now: the fence flag is set by a timer, so
   * a request that waited after being judged (reading its body, or a paused process) is checked again before it
   * leaves. It narrows the window to the moment of sending; a process frozen after that needs the API server to fence.
   */
  stillServes(state: RouteState): boolean {
    // A request judged under a fenced table was judged as fenced: only an unfenced judgement can go stale.
    return this.state === state && (state.fenced || !this.leaseOver(state.table));
  }

  /** Whether the lease has run out: never for a source without one. */
  private leaseOver(table: RouteTable): boolean {
    return (
      this.options.source.leased &&
      leaseExpired({ extendedAt: this.extendedAt, leaseSeconds: table.leaseSeconds, marginMs: this.options.leaseMarginMs ?? 0, now: this.clock.monotonic() })
    );
  }

  private tick(): void {
    const state = this.state;
    if (state === undefined) return;
    const now = this.clock.monotonic();
    const fenced = this.leaseOver(state.table);
    if (fenced !== state.fenced) {
      this.options.logger[fenced ? 'error' : 'info'](
        { source: this.options.source.description, leaseSeconds: state.table.leaseSeconds },
        fenced ? 'lease over: fencing, serving no buckets until the hub extends it' : 'lease extended for the current table: serving it again',
      );
      this.install(state.table, fenced ? 'fenced' : 'unfenced', fenced);
    }
    const extended = this.extendedAt;
    const saved = this.savedExtendedAt;
    if (extended !== undefined && (saved === undefined || (extended > saved && now - saved > (state.table.leaseSeconds * 1000) / 2))) {
      this.save(state.table).catch((err: unknown) =>
        this.storeFailures.warn(this.options.logger, err instanceof Error ? err.message : String(err), { err, path: this.options.store.path }, 'cannot store the lease extension; retrying'),
      );
    }
  }

  private install(table: RouteTable, why: string, fenced = this.leaseOver(table)): void {
    const { links, metrics, logger, now } = this.options;
    const state = new RouteState({ table, fenced, leasePending: !this.extendedLive, meshSecret: this.options.meshSecret, continueTokens: this.continueTokens, link: (route) => links.link(route) });
    this.state = state;
    this.openWatches.reconcile(state, this.countEnded);
    this.openSessions.reconcile(state, this.logSessionEnded);
    links.retain(new Set(state.clusters.keys()));
    metrics.routeTableVersion.set(table.version);
    metrics.routeTableAppliedAt.set(now() / 1000);
    metrics.fenced.set(fenced ? 1 : 0);
    this.options.onInstalled?.(table);
    logger.info(
      { version: table.version, why, clusters: table.clusters.map((c) => ({ name: c.name, buckets: fenced ? [] : c.buckets })) },
      'route table applied',
    );
  }

  /**
   * Stores the table, then acknowledges it once the writes admitted before it are answered. A failure (a store that
   * went read-only, NATS down) is retried with backoff until it succeeds, the process stops, or a newer table takes
   * over: unacknowledged, the hub extends no lease, and the proxy would stay fenced after the cause is gone. Each new
   * cause is logged once, the recovery once (route-controller.test.ts, "retries a table it could not store").
   */
  private async persistAndAcknowledge(table: RouteTable, earlierWrites: Promise<void>): Promise<void> {
    const { source, logger } = this.options;
    let waitMs = RETRY_FIRST_MS;
    let cause: string | undefined;
    for (let attempt = 1; !this.stopped && (this.state?.table.version ?? 0) <= table.version; attempt++) {
      try {
        await this.save(table);
        await earlierWrites;
        await source.acknowledge?.(table, this.options.appliedRules?.(table));
        this.acknowledged = Math.max(this.acknowledged, table.version);
        if (cause !== undefined) logger.info({ version: table.version, attempts: attempt }, 'route table stored and acknowledged after failures');
        return;
      } catch (err) {
        const why = err instanceof Error ? err.message : String(err);
        if (why !== cause) logger.error({ err, version: table.version, retryInMs: waitMs }, 'route table applied but not stored or acknowledged; retrying');
        cause = why;
      }
      await new Promise<void>((resolve) => setTimeout(resolve, waitMs).unref());
      waitMs = Math.min(waitMs * 2, RETRY_MAX_MS);
    }
  }

  private async save(table: RouteTable): Promise<void> {
    const extendedAt = this.extendedAt;
    const { boot } = this.clock;
    // The wall time of the extension, for people reading the file: the wall clock now, less the monotonic time since.
    const contactAt = extendedAt === undefined ? 0 : Math.round(this.options.now() - (this.clock.monotonic() - extendedAt));
    const lease = extendedAt === undefined || boot === undefined ? {} : { lease: { monotonicAt: extendedAt, boot } };
    await this.options.store.save({ table, contactAt, ...lease });
    this.savedExtendedAt = extendedAt;
  }
}

/** Whether two tables are the same, byte for byte once serialised (a stored table and its live copy). */
function sameTable(a: RouteTable, b: RouteTable): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
