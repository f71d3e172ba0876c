import Fastify, { type FastifyInstance } from 'fastify';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { request } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { acceptsGzip, sendGunzipped } from '../../../src/proxy/request/answer/gzip-answer.js';

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
    ['*;q=0', false],
    ['gzip;q=0, *', false],
    ['*, gzip;q=0', false],
    ['br, *;q=0.1', true],
    [['br', 'gzip'], true],
  ] as const)('%j -> %s', (header, expected) => {
    expect(acceptsGzip(header as string | string[] | undefined)).toBe(expected);
  });
});

/** A server whose route answers as the API server sends a gzip answer (`body`, or `body` then a cut), through sendGunzipped. */
async function serve(body: Buffer, cut?: Error): Promise<{ app: FastifyInstance; url: string }> {
  const app = Fastify();
  app.get('/', (_request, reply) => {
    const stream = new PassThrough();
    reply.headers({ 'content-encoding': 'gzip', 'content-length': String(body.length), 'content-type': 'application/json' });
    sendGunzipped(reply, { statusCode: 200, stream });
    // In pieces of 16 KiB over several turns, as TLS records come.
    const next = (offset: number): void => {
      if (offset >= body.length) return void (cut ? stream.destroy(cut) : stream.end());
      stream.write(body.subarray(offset, offset + 16_384));
      setImmediate(() => next(offset + 16_384));
    };
    next(0);
    return reply;
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, url: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/` };
}

describe('sendGunzipped', () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  const list = Buffer.from(JSON.stringify({ kind: 'ConfigMapList', items: Array.from({ length: 3000 }, (_, i) => ({ metadata: { name: `cm-${i}` }, data: { v: String(i * 7919) } })) }));

  it('sends a long list decoded and whole, with its own length, without the encoding', async () => {
    let url: string;
    ({ app, url } = await serve(gzipSync(list)));
    const res = await request(url);
    const body = Buffer.from(await res.body.arrayBuffer());
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(res.headers['content-length']).toBe(String(list.length));
    expect(res.headers['content-type']).toBe('application/json');
    expect(body.equals(list)).toBe(true);
  });

  it('streams what decodes to more than one call may make, and what comes compressed over 1 MiB, each whole', async () => {
    // 9 MiB that compress to little: over the decoded limit.
    const large = Buffer.alloc(9 * 1024 * 1024, 'abcdefgh');
    // 1.5 MiB that do not compress: over the compressed limit.
    const noisy = randomBytes(1536 * 1024);
    for (const plain of [large, noisy]) {
      let url: string;
      ({ app, url } = await serve(gzipSync(plain)));
      const res = await request(url);
      const body = Buffer.from(await res.body.arrayBuffer());
      expect(res.headers['content-length']).toBeUndefined();
      expect(res.headers['content-encoding']).toBeUndefined();
      expect(body.equals(plain)).toBe(true);
      await app.close();
      app = undefined;
    }
  });

  it('answers 502 with a Status for bytes that are not gzip, and cuts an answer the API server cut', async () => {
    let url: string;
    ({ app, url } = await serve(Buffer.from('this is not gzip at all, '.repeat(100))));
    const res = await request(url);
    expect(res.statusCode).toBe(502);
    expect((await res.body.json()) as { kind: string; code: number }).toMatchObject({ kind: 'Status', code: 502 });
    await app.close();
    // Cut while streamed (over 1 MiB compressed) or while read whole: never a 200 whose body looks whole (an error
    // answer when the cut comes before the head went out, else the connection cut).
    const compressed = gzipSync(randomBytes(1536 * 1024));
    for (const cutAnswer of [compressed.subarray(0, 1200 * 1024), gzipSync(list).subarray(0, 1000)]) {
      await app.close();
      ({ app, url } = await serve(cutAnswer, new Error('upstream reset')));
      const outcome = await (async () => {
        try {
          const r = await request(url);
          await r.body.arrayBuffer();
          return r.statusCode;
        } catch (err) {
          return err as Error;
        }
      })();
      if (!(outcome instanceof Error)) expect(outcome).toBeGreaterThanOrEqual(500);
    }
  });
});
