import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { CtrlmeshError, UpstreamTimeoutError } from '../../../src/errors.js';
import { failureAnswer, openWatchStream } from '../../../src/proxy/request/answer/forward.js';
import type { ClusterEntry } from '../../../src/proxy/routes/route-state.js';
import type { Http2Answer, Http2WatchPool } from '../../../src/proxy/upstream/http2-watches.js';

const silent = pino({ level: 'silent' });

/** A pool that answers every request with `headers` and records whether the stream was cancelled. */
function poolAnswering(headers: Record<string, string | string[]>): { pool: Http2WatchPool; cancelled: () => boolean; sent: () => Record<string, unknown> } {
  let cancelled = false;
  let sent: Record<string, unknown> = {};
  const pool = {
    request: async (h: Record<string, unknown>): Promise<Http2Answer> => {
      sent = h;
      return { statusCode: 200, headers: { ':status': '200', ...headers }, stream: { close: () => void (cancelled = true) } } as unknown as Http2Answer;
    },
  } as unknown as Http2WatchPool;
  return { pool, cancelled: () => cancelled, sent: () => sent };
}

const entry = { upstream: { authorization: 'Bearer proxy', upstreamPath: (p: string) => p } } as unknown as ClusterEntry;
const plan = { entry, path: '/api/v1/configmaps', query: 'watch=1', accept: 'application/json', encoding: 'identity' as const, headers: { allowImpersonation: false } };
const request = { method: 'GET', headers: { authorization: 'Bearer client', 'impersonate-user': 'admin', accept: '*/*' } } as unknown as IncomingMessage;

describe('a watch sent as an HTTP/2 stream', () => {
  it("goes with the proxy's credentials and the judged path, the client's authority stripped; its answer's head without pseudo-headers", async () => {
    const { pool, sent } = poolAnswering({ 'content-type': 'application/json', 'audit-id': 'x' });
    const answer = await openWatchStream(pool, request, plan, () => false);
    expect(sent()).toEqual({ authorization: 'Bearer proxy', accept: 'application/json', ':method': 'GET', ':path': '/api/v1/configmaps?watch=1' });
    expect(answer?.headers).toEqual({ 'content-type': 'application/json', 'audit-id': 'x' });
  });

  it('fails, its stream cancelled, on an answer header HTTP/1.1 cannot carry, before the client is answered anything', async () => {
    const bad: Record<string, string | string[]>[] = [{ 'x-bad': 'a\u0100b' }, { 'x-bad': ['ok', 'a\nb'] }, { 'bad name': 'v' }];
    for (const headers of bad) {
      const { pool, cancelled } = poolAnswering(headers);
      await expect(openWatchStream(pool, request, plan, () => false)).rejects.toThrow(CtrlmeshError);
      expect(cancelled()).toBe(true);
    }
  });

  it('is cancelled, and answers nothing, when its client left while the API server answered', async () => {
    const { pool, cancelled } = poolAnswering({});
    expect(await openWatchStream(pool, request, plan, () => true)).toBeUndefined();
    expect(cancelled()).toBe(true);
  });
});

describe('the answer to a request its cluster could not be reached for', () => {
  it('is a Status for anything thrown, an Error or not', () => {
    for (const thrown of [undefined, null, 'text', 42, { code: 'EOPENBREAKER' }]) {
      const { status, retryAfterSeconds } = failureAnswer(thrown, 'a', 7, silent);
      expect([status.kind, status.code, retryAfterSeconds]).toEqual(['Status', 503, 1]);
    }
  });

  it('names the open breaker with its retry, and a timeout as 504', () => {
    const open = Object.assign(new Error('Breaker is open'), { code: 'EOPENBREAKER' });
    expect(failureAnswer(open, 'a', 7, silent)).toMatchObject({ status: { code: 503, message: 'cluster "a" is failing: its circuit breaker is open' }, retryAfterSeconds: 7 });
    expect(failureAnswer(new UpstreamTimeoutError(5000), 'a', 7, silent)).toMatchObject({ status: { code: 504, reason: 'InternalError' } });
  });
});
