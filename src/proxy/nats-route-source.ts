import { connect as tcpConnect } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { acknowledge, connectNats, watchRouteTable, type NatsClientConfig, type NatsLink, type RouteTable, type Watch } from '../transport/index.js';
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
}

/**
 * Route tables from the hub's KV bucket, acknowledged on the hub's subject. It connects in the background, so a
 * proxy with a stored table serves while NATS is down; its contact is the NATS connection, and it is leased: a
 * proxy out of contact for longer than the table's lease fences itself.
 */
export class NatsRouteSource implements RouteSource {
  readonly leased = true;
  readonly description: string;
  private readonly options: NatsRouteSourceOptions;
  private link: NatsLink | undefined;
  private watch: Watch | undefined;
  private unlisten: (() => void) | undefined;
  private applied: RouteTable | undefined;
  private reack: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(options: NatsRouteSourceOptions) {
    this.options = options;
    this.description = `NATS ${options.nats.servers.join(',')} (routes of ${options.operator}/${options.shard})`;
  }

  async start(handlers: RouteSourceHandlers): Promise<void> {
    const { nats, trusted, operator, shard, logger } = this.options;
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
            if (event.state === 'connected') this.sendAck();
          });
          this.watch = watchRouteTable({ link, operator, shard, logger, trusted, onTable: handlers.onTable });
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

  async acknowledge(table: RouteTable): Promise<void> {
    this.applied = table;
    this.sendAck();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.reack);
    this.watch?.stop();
    this.unlisten?.();
    await this.link?.close();
  }

  private sendAck(): void {
    const { link, applied } = this;
    if (link === undefined || applied === undefined || link.state() !== 'connected') return;
    const { operator, shard, from } = this.options;
    acknowledge({ link, operator, shard, version: applied.version, ...(from ? { from } : {}) });
  }
}
