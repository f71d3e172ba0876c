import { Client, type Dispatcher } from 'undici';

/**
 * Watches to one API server as streams of as few HTTP/2 connections as its stream limit allows. A watch goes to the
 * first connection with a free stream, and a new connection is opened only when none has one, counting the requests
 * queued on a connection still negotiating: undici's Pool takes a negotiating connection as busy after one request,
 * so a burst of watches would open (and pay a TLS handshake for) one connection each.
 */
export class Http2WatchPool {
  private readonly clients: Client[] = [];

  constructor(
    private readonly origin: string,
    private readonly options: Client.Options,
    /** Streams a connection carries at most: the server's limit (every request beyond it would wait unsent). */
    private readonly streams: number,
  ) {}

  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): boolean {
    return this.clientWithRoom().dispatch(options, handler);
  }

  async close(): Promise<void> {
    await Promise.all(this.clients.splice(0).map((client) => client.close()));
  }

  async destroy(): Promise<void> {
    await Promise.all(this.clients.splice(0).map((client) => client.destroy()));
  }

  private clientWithRoom(): Client {
    for (let i = 0; i < this.clients.length; i++) {
      const client = this.clients[i]!;
      if (client.closed || client.destroyed) {
        this.clients.splice(i--, 1);
        continue;
      }
      if (client.stats.size < this.streams) return client;
    }
    const client = new Client(this.origin, { ...this.options, pipelining: this.streams });
    this.clients.push(client);
    return client;
  }
}
