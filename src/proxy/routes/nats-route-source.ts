import { connect as tcpConnect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import {
  acknowledge,
  connectNats,
  requestRenewal,
  watchRouteTable,
  type NatsClientConfig,
  type AckRule,
  type NatsLink,
  type RouteTable,
  type Watch,
} from '../../transport/index.js';
import { monotonicNow } from './lease-clock.js';
import type { RouteSource, RouteSourceHandlers } from './route-source.js';

export interface NatsRouteSourceOptions {
  nats: NatsClientConfig;
  /** Public keys of the hubs' route-signing nkeys: a table signed by any other key is never applied. */
  trusted: readonly string[];
  operator: string;
  shard: string;
  /** This proxy's name in acknowledgements (the pod name). */
  from?: string;
  logger: Logger;
  /** How often the latest acknowledgement is repeated (a lost one would delay a handover until the lease). */
  reackMs?: number;
  /** How often the lease is renewed; default a quarter of the table's lease (between 250 ms and 5 s). */
  renewMs?: number;
  /** The monotonic clock `askedAt` is read on: the route controller's lease clock (default CLOCK_MONOTONIC). */
  monotonic?: () => number;
}

/**
 * Route tables from the hub's KV bucket, through the feed a hub opens for the shard (a proxy may use no JetStream
 * API), acknowledged on the hub's subject. It connects in the background, so a proxy with a stored table serves
 * while NATS is down. It is leased: it asks the hub leader to extend its lease every quarter lease, and the
 * extensions (signed, for an acknowledged table as new as the hub's) are its only contact; the connection state is
 * not. A hub answer naming a version the watch has not delivered for a while means the watch stalled: it is reopened.
 */
export class NatsRouteSource implements RouteSource {
  readonly leased = true;
  readonly description: string;
  private readonly options: NatsRouteSourceOptions;
  private link: NatsLink | undefined;
  private watch: Watch | undefined;
  private unlisten: (() => void) | undefined;
  private applied: RouteTable | undefined;
  /** The cluster rules in force from `applied`, named in its acknowledgements. */
  private appliedRules: readonly AckRule[] = [];
  /** Version of the latest table received (applied or not yet acknowledged). */
  private received = 0;
  private reack: NodeJS.Timeout | undefined;
  private renewal: NodeJS.Timeout | undefined;
  private handlers: RouteSourceHandlers | undefined;
  /** Since when the hub has named a version the watch has not delivered. */
  private behindSince: number | undefined;
  /** Whether the latest renewal answered was an extension: the lease then runs without a renewal per table. */
  private extended = false;
  private stopped = false;

  constructor(options: NatsRouteSourceOptions) {
    this.options = options;
    this.description = `NATS ${options.nats.servers.join(',')} (routes of ${options.operator}/${options.shard})`;
  }

  async start(handlers: RouteSourceHandlers): Promise<void> {
    const { nats, trusted, operator, shard, logger } = this.options;
    this.handlers = handlers;
    handlers.onContact(false);
    this.untilReachable()
      .then(() => (this.stopped ? undefined : connectNats({ config: nats, name: `ctrlmesh-proxy-${shard}`, logger })))
      .then(
        (link) => {
          if (link === undefined) return;
          if (this.stopped) return void link.close();
          this.link = link;
          handlers.onContact(link.state() === 'connected');
          this.unlisten = link.onEvent((event) => {
            handlers.onContact(event.state === 'connected');
            if (event.state !== 'connected') return;
            this.sendAck();
            this.scheduleRenewal(0);
          });
          this.watch = watchRouteTable({
            link,
            operator,
            shard,
            logger,
            trusted,
            onTable: (table) => {
              this.received = Math.max(this.received, table.version);
              handlers.onTable(table);
            },
          });
          this.scheduleRenewal(0);
        },
        (err: unknown) => logger.error({ err }, 'cannot connect to NATS; serving the stored table while it lasts'),
      );
    this.reack = setInterval(() => this.sendAck(), this.options.reackMs ?? 10_000);
    this.reack.unref();
  }

  /**
   * Waits until some server accepts a TCP connection, polling with unreferenced timers that stop() ends: the NATS
   * client's own first-connect loop cannot be cancelled, and would keep a stopped proxy's process alive.
   */
  private async untilReachable(): Promise<void> {
    const reachable = (url: string): Promise<boolean> =>
      new Promise((resolve) => {
        const { hostname, port } = new URL(url.includes('://') ? url : `nats://${url}`);
        const socket = tcpConnect({ host: hostname, port: Number(port || 4222) });
        socket.unref();
        socket.once('connect', () => {
          socket.destroy();
          resolve(true);
        });
        socket.once('error', () => resolve(false));
      });
    while (!this.stopped) {
      if ((await Promise.all(this.options.nats.servers.map(reachable))).some(Boolean)) return;
      await sleep(500, undefined, { ref: false });
    }
  }

  async acknowledge(table: RouteTable, rules: readonly AckRule[] = []): Promise<void> {
    const previousLease = this.applied?.leaseSeconds;
    this.applied = table;
    this.appliedRules = rules;
    this.sendAck();
    // Renew at once when the last answer did not extend (a proxy that just caught up should not wait for the next
    // period) or the lease changed (its period with it); an extended lease runs on, and a renewal per table would
    // cost every change a signed round trip.
    if (!this.extended || table.leaseSeconds !== previousLease) this.scheduleRenewal(0);
  }

  private renewEveryMs(): number {
    if (this.options.renewMs !== undefined) return this.options.renewMs;
    const lease = (this.applied?.leaseSeconds ?? 4) * 1000;
    return Math.min(5_000, Math.max(250, lease / 4));
  }

  private scheduleRenewal(delayMs: number): void {
    if (this.stopped) return;
    clearTimeout(this.renewal);
    this.renewal = setTimeout(() => void this.renew(), delayMs);
    this.renewal.unref();
  }

  private async renew(): Promise<void> {
    const { link, handlers } = this;
    const now = this.options.monotonic ?? monotonicNow;
    const every = this.renewEveryMs();
    if (link !== undefined && handlers !== undefined && link.state() === 'connected') {
      const askedAt = now();
      const acknowledged = this.applied?.version ?? 0;
      try {
        const reply = await requestRenewal({
          link,
          operator: this.options.operator,
          shard: this.options.shard,
          acknowledged,
          trusted: this.options.trusted,
          timeoutMs: every,
          logger: this.options.logger,
        });
        this.extended = reply.extended;
        if (reply.extended) handlers.onRenewal(askedAt);
        this.checkStall(reply.version, now(), every);
        // Refused for a version acknowledged while the request was out: ask again with it, now.
        if (!reply.extended && (this.applied?.version ?? 0) > acknowledged) {
          this.scheduleRenewal(0);
          return;
        }
      } catch (err) {
        this.extended = false;
        this.options.logger.debug({ err: (err as Error).message }, 'lease renewal not answered');
      }
    }
    this.scheduleRenewal(every);
  }

  /** The hub names version `published`: a watch that has not delivered it for two periods is reopened. */
  private checkStall(published: number, now: number, every: number): void {
    if (published <= this.received) {
      this.behindSince = undefined;
      return;
    }
    this.behindSince ??= now;
    if (now - this.behindSince >= Math.max(2 * every, 1_000)) {
      this.options.logger.warn({ received: this.received, published }, 'the route watch is behind the hub; reopening it');
      this.watch?.restart();
      this.behindSince = now;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.renewal);
    clearInterval(this.reack);
    this.watch?.stop();
    this.unlisten?.();
    await this.link?.close();
  }

  private sendAck(): void {
    const { link, applied } = this;
    if (link === undefined || applied === undefined || link.state() !== 'connected') return;
    const { operator, shard, from } = this.options;
    acknowledge({ link, operator, shard, version: applied.version, ...(from ? { from } : {}), rules: [...this.appliedRules] });
  }
}
