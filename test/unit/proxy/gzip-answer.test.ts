import Fastify, { type FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { acceptsGzip, gunzipped } from '../../../src/proxy/request/gzip-answer.js';
import { batchByTurn } from '../../../src/proxy/request/turn-batches.js';
import { sendWhole } from '../../../src/proxy/request/whole-body.js';

/** Reads a stream to its end; rejects with its error. */
async function drain(stream: Readable): Promise<Buffer[]> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return chunks;
}

describe('acceptsGzip', () => {
  it.each([
    [undefined, false],
    ['', false],
    ['identity', false],
    ['br, deflate', false],
    ['gzip;q=0', false],
    ['gzip; q=0.000', false],
    ['gzip', true],
    ['GZIP', true],
    ['deflate, gzip;q=0.5', true],
    ['x-gzip', true],
    ['*', true],
    [['br', 'gzip'], true],
  ] as const)('%j -> %s', (header, expected) => {
    expect(acceptsGzip(header as string | string[] | undefined)).toBe(expected);
  });
});

describe('batchByTurn', () => {
  it('passes on the chunks of one turn as one, in order, and every turn after', async () => {
    const source = new PassThrough();
    const batches = drain(batchByTurn(source));
    source.write(Buffer.from('a'));
    source.write(Buffer.from('b'));
    source.write(Buffer.from('c'));
    await new Promise((resolve) => setImmediate(resolve));
    source.write(Buffer.from('d'));
    source.end(Buffer.from('e'));
    const seen = (await batches).map((b) => b.toString());
    expect(seen.join('')).toBe('abcde');
    expect(seen.length).toBeLessThan(5);
  });

  it('ends with the source error, and with a source closed before its end', async () => {
    const failing = new PassThrough();
    const failed = drain(batchByTurn(failing));
    failing.write('x');
    failing.destroy(new Error('connection reset'));
    await expect(failed).rejects.toThrow('connection reset');

    const cut = new PassThrough();
    const closed = drain(batchByTurn(cut));
    cut.write('x');
    cut.destroy();
    await expect(closed).rejects.toThrow(/premature close/i);
  });

  it('holds the source while its reader does not read', async () => {
    const source = new PassThrough({ highWaterMark: 16 });
    const batches = batchByTurn(source);
    const big = Buffer.alloc(2 * 1024 * 1024, 7);
    // Nobody reads `batches` yet: the source is paused once a batch waits, not read without end.
    source.write(big);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(source.isPaused()).toBe(true);
    const all = drain(batches);
    source.end();
    expect(Buffer.concat(await all).equals(big)).toBe(true);
  });

  it('destroying it destroys the source (the client left)', async () => {
    const source = new PassThrough();
    const batches = batchByTurn(source);
    batches.destroy();
    await new Promise((resolve) => setImmediate(resolve));
    expect(source.destroyed).toBe(true);
  });
});

/** A server whose route answers with `body` as the API server sends a gzip answer, decoded and sent by sendWhole. */
async function serve(body: Buffer | Error, limit: number): Promise<{ app: FastifyInstance; url: string }> {
  const app = Fastify();
  app.get('/', (_request, reply) => {
    const stream = new PassThrough();
    reply.headers({ 'content-encoding': 'gzip', 'content-length': String(body instanceof Error ? 10 : body.length), 'content-type': 'application/json' });
    sendWhole(reply, gunzipped(reply, { statusCode: 200, stream }), limit);
    if (body instanceof Error) {
      stream.write(Buffer.from([0x1f, 0x8b]));
      setImmediate(() => stream.destroy(body));
    } else {
      // In pieces of 1,400 bytes over several turns, as TLS records come.
      const next = (offset: number): void => {
        if (offset >= body.length) return void stream.end();
        stream.write(body.subarray(offset, offset + 1400));
        setImmediate(() => next(offset + 1400));
      };
      next(0);
    }
    return reply;
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/` };
}

describe('gunzipped', () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  const list = Buffer.from(JSON.stringify({ kind: 'ConfigMapList', items: Array.from({ length: 3000 }, (_, i) => ({ metadata: { name: `cm-${i}` }, data: { v: String(i * 7919) } })) }));

  it('sends a long answer decoded, streamed, without the encoding and the compressed length', async () => {
    let url: string;
    ({ app, url } = await serve(gzipSync(list), 64 * 1024));
    const res = await request(url);
    const body = Buffer.from(await res.body.arrayBuffer());
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.headers['content-length']).toBeUndefined();
    expect(res.headers['content-type']).toBe('application/json');
    expect(body.equals(list)).toBe(true);
  });

  it('sends a decoded answer that ends within the limit whole, with its own length', async () => {
    let url: string;
    ({ app, url } = await serve(gzipSync(list), 4 * 1024 * 1024));
    const res = await request(url);
    const body = Buffer.from(await res.body.arrayBuffer());
    expect(res.headers['content-length']).toBe(String(list.length));
    expect(body.equals(list)).toBe(true);
  });

  it('cuts the answer when the bytes are not gzip or the API server fails: never a partial body that looks whole', async () => {
    let url: string;
    ({ app, url } = await serve(Buffer.from('this is not gzip at all, '.repeat(100)), 64));
    await expect(request(url).then((res) => res.body.arrayBuffer())).rejects.toThrow();
    await app.close();
    ({ app, url } = await serve(new Error('upstream reset'), 64));
    await expect(request(url).then((res) => res.body.arrayBuffer())).rejects.toThrow();
  });
});
