import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { EXPIRED_EVENT } from '../../../src/proxy/index.js';
import { WatchRelay } from '../../../src/proxy/request/answer/watch-relay.js';

const event = (hash: string, rv: number): string => `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"${rv}","labels":{"h":"${hash}"}}}}\n`;
const admits = (m: { labels?: Readonly<Record<string, string>> }): boolean => m.labels?.h === '1';
const judge = { mustJudge: true, echoSuffices: true, labelKeys: ['h'], admits, owns: admits };

interface Bed {
  upstream: PassThrough;
  relay: Promise<WatchRelay>;
  closed: Promise<void>;
  /** The client's answer: its head, then its body as it comes. */
  answer: Promise<IncomingMessage>;
}

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

/** A relay per request to a local server, from a stream the test writes as the API server would. */
async function bed(): Promise<Bed> {
  const upstream = new PassThrough();
  let relayed!: (relay: WatchRelay) => void;
  let closed!: () => void;
  const relay = new Promise<WatchRelay>((resolve) => (relayed = resolve));
  const onClose = new Promise<void>((resolve) => (closed = resolve));
  server = createServer((_req, res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.flushHeaders();
    relayed(new WatchRelay(upstream, res, { judge, bookmarks: false, onFiltered: () => undefined }, closed));
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const answer = new Promise<IncomingMessage>((resolve, reject) => request({ port, path: '/watch' }, resolve).on('error', reject).end());
  return { upstream, relay, closed: onClose, answer };
}

function body(res: IncomingMessage): Promise<{ text: string; cut: boolean }> {
  return new Promise((resolve) => {
    let text = '';
    res.on('data', (c: Buffer) => (text += c.toString()));
    res.on('end', () => resolve({ text, cut: false }));
    res.on('aborted', () => resolve({ text, cut: true }));
    res.on('error', () => resolve({ text, cut: true }));
  });
}

describe('WatchRelay', () => {
  it('relays the events the shard may see, and ends when the API server ends the watch', async () => {
    const { upstream, answer, closed } = await bed();
    const got = body(await answer);
    upstream.write(event('1', 1) + event('2', 2).slice(0, 20));
    upstream.end(event('2', 2).slice(20) + event('1', 3));
    expect(await got).toEqual({ text: event('1', 1) + event('1', 3), cut: false });
    await closed;
  });

  it('expire() ends the watch with 410 Expired after the whole events sent, and ends the upstream stream', async () => {
    const { upstream, answer, relay, closed } = await bed();
    const got = body(await answer);
    upstream.write(event('1', 1) + '{"type":"ADD');
    await new Promise((resolve) => setImmediate(resolve));
    (await relay).expire();
    expect(await got).toEqual({ text: event('1', 1) + EXPIRED_EVENT, cut: false });
    await closed;
    expect(upstream.destroyed).toBe(true);
  });

  it('a client that leaves ends the upstream stream and unregisters', async () => {
    const { upstream, answer, closed } = await bed();
    (await answer).destroy();
    await closed;
    expect(upstream.destroyed).toBe(true);
  });

  it('an upstream that fails cuts the client off: never an end that looks whole', async () => {
    const { upstream, answer, closed } = await bed();
    const got = body(await answer);
    upstream.write(event('1', 1));
    upstream.destroy(new Error('the API server went away'));
    expect((await got).cut).toBe(true);
    await closed;
  });

  it('an upstream that ends mid-line cuts the client off, the cut line unsent', async () => {
    const { upstream, answer, closed } = await bed();
    const got = body(await answer);
    // node:http2 ends a stream (no error) whose connection was closed cleanly, wherever the last event stood.
    upstream.end(event('1', 1) + event('2', 2).slice(0, 30));
    expect(await got).toEqual({ text: event('1', 1), cut: true });
    await closed;
  });

  it('stops reading the API server while the client reads nothing, and reads on when it does', async () => {
    const { upstream, answer } = await bed();
    const res = await answer;
    res.pause();
    const line = event('1', 1);
    // Far more than the sockets' buffers hold.
    const chunk = line.repeat(Math.ceil((64 * 1024) / line.length));
    for (let i = 0; i < 200 && !upstream.isPaused(); i++) {
      upstream.write(chunk);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(upstream.isPaused()).toBe(true);
    res.resume();
    await new Promise((resolve) => res.once('data', resolve));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(upstream.isPaused()).toBe(false);
  });
});
