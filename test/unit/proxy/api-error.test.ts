import Fastify, { type FastifyError } from 'fastify';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { apiErrorHandler } from '../../../src/proxy/request/entry/api-handler.js';

/** A listener with the proxy's error handler, and routes that fail as the API route can: thrown, or sent as errors. */
async function failingApp(lines: string[]) {
  const logger = pino({ level: 'error' }, { write: (line: string) => void lines.push(line) });
  const app = Fastify();
  app.setErrorHandler(apiErrorHandler(logger));
  app.get('/thrown', async () => {
    throw new Error('other side closed');
  });
  app.get('/sent', (_request, reply) => {
    reply.send(Object.assign(new Error('the upstream went away'), { statusCode: 503 }));
  });
  app.get('/client', async () => {
    throw Object.assign(new Error('Unsupported Media Type: text/x-nope'), { statusCode: 415, code: 'FST_ERR_CTP_INVALID_MEDIA_TYPE' }) as FastifyError;
  });
  app.get('/odd', async () => {
    throw Object.assign(new Error('a status no HTTP answer has'), { statusCode: 999 });
  });
  await app.ready();
  return app;
}

describe('apiErrorHandler', () => {
  it('answers an error nothing else answered with a Kubernetes Status, logged when it is the proxy\'s', async () => {
    const lines: string[] = [];
    const app = await failingApp(lines);
    const thrown = await app.inject({ method: 'GET', url: '/thrown' });
    expect(thrown.statusCode).toBe(500);
    expect(thrown.headers['content-type']).toMatch(/^application\/json/u);
    expect(thrown.json()).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      reason: 'InternalError',
      code: 500,
      message: 'the proxy could not complete the request: other side closed',
    });
    expect((await app.inject({ method: 'GET', url: '/sent' })).json()).toMatchObject({ code: 503, reason: 'ServiceUnavailable' });
    // A code outside 400-599 is not passed on.
    expect((await app.inject({ method: 'GET', url: '/odd' })).json()).toMatchObject({ code: 500, reason: 'InternalError' });
    expect(lines.map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(Array(3).fill('a request failed in the proxy'));
    await app.close();
  });

  it('keeps a client error\'s own code and message, and does not log it', async () => {
    const lines: string[] = [];
    const app = await failingApp(lines);
    const res = await app.inject({ method: 'GET', url: '/client' });
    expect(res.statusCode).toBe(415);
    expect(res.json()).toMatchObject({ kind: 'Status', code: 415, reason: 'UnsupportedMediaType', message: 'Unsupported Media Type: text/x-nope' });
    expect(lines).toEqual([]);
    await app.close();
  });
});
