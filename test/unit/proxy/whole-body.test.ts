import Fastify, { type FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { sendWhole } from '../../../src/proxy/request/answer/whole-body.js';

const LIMIT = 1024;

/** A server whose one route answers with `chunks` through sendWhole, as reply-from would hand them over: headers copied. */
async function serve(chunks: (Buffer | Error)[], upstreamHeaders: Record<string, string>): Promise<{ app: FastifyInstance; url: string }> {
  const app = Fastify();
  app.get('/', (_request, reply) => {
    const stream = new PassThrough();
    reply.headers(upstreamHeaders);
    sendWhole(reply, { statusCode: 200, stream }, LIMIT);
    // One chunk per turn, as the API server's TLS records come.
    const next = (i: number): void => {
      const chunk = chunks[i];
      if (chunk === undefined) return void stream.end();
      if (chunk instanceof Error) return void stream.destroy(chunk);
      stream.write(chunk);
      setImmediate(() => next(i + 1));
    };
    next(0);
    return reply;
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/` };
}

const bytes = (n: number, fill: number): Buffer => Buffer.alloc(n, fill);

describe('sendWhole', () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('sends an answer that ends within the limit whole, with its length and without the upstream framing', async () => {
    const chunks = [bytes(300, 1), bytes(300, 2), bytes(300, 3)];
    let url: string;
    ({ app, url } = await serve(chunks, { 'transfer-encoding': 'chunked', 'content-type': 'application/json' }));
    const res = await request(url);
    const body = Buffer.from(await res.body.arrayBuffer());
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-length']).toBe('900');
    expect(res.headers['transfer-encoding']).toBeUndefined();
    expect(res.headers['content-type']).toBe('application/json');
    expect(body.equals(Buffer.concat(chunks))).toBe(true);
  });

  it('streams a longer answer on, with the bytes read first at its head and in order', async () => {
    const chunks = Array.from({ length: 8 }, (_, i) => bytes(400, i + 1));
    let url: string;
    ({ app, url } = await serve(chunks, { 'transfer-encoding': 'chunked' }));
    const res = await request(url);
    const body = Buffer.from(await res.body.arrayBuffer());
    expect(res.headers['content-length']).toBeUndefined();
    expect(body.equals(Buffer.concat(chunks))).toBe(true);
  });

  it('sends an empty answer whole', async () => {
    let url: string;
    ({ app, url } = await serve([], {}));
    const res = await request(url);
    expect(res.headers['content-length']).toBe('0');
    expect((await res.body.arrayBuffer()).byteLength).toBe(0);
  });

  it('cuts the client off when the upstream fails before the end, within the limit or past it', async () => {
    for (const chunks of [[bytes(300, 1), new Error('upstream reset')], [bytes(800, 1), bytes(800, 2), new Error('upstream reset')]]) {
      let url: string;
      ({ app, url } = await serve(chunks, { 'transfer-encoding': 'chunked' }));
      // Never a well-formed answer: the request fails, or its body does.
      await expect(request(url).then((res) => res.body.arrayBuffer())).rejects.toThrow();
      await app.close();
      app = undefined;
    }
  });
});
