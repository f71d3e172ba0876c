import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { run } from '../../../src/cli/run.js';
import { registerStatusRoute, type HubStatus } from '../../../src/hub/status.js';

// version.ts finds package.json relative to dist/; these tests run from the sources and do not need it.
vi.mock('../../../src/cli/commands/version.js', () => ({
  versionCommand: { name: 'version', summary: 'Print the version of ctrlmesh.', usage: '', options: {}, run: async () => 0 },
}));

const STATUS: HubStatus = {
  identity: 'hub-0',
  leader: true,
  clusters: [{ name: 'eu-west-1', labels: {}, server: 'https://api.eu-west-1.example:6443', health: 'Ready', lastHeartbeat: null, registeredAt: '2026-01-01T00:00:00.000Z', reportedAt: null }],
  removedClusters: [],
  operators: [],
};
const TOKEN = 'k5Hq2v9Zx1mN8pR4tW7yB3cF6gJ0sL2d';

describe("the hub's /status route", () => {
  let app: FastifyInstance;
  afterEach(async () => app.close());

  it('answers the status to anyone who reaches it when no token is given (the listener is loopback then)', async () => {
    app = Fastify();
    registerStatusRoute(app, { status: () => STATUS });
    const res = await app.inject({ method: 'GET', url: '/status' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(STATUS);
  });

  it('answers 401 without the bearer token, whatever else the request carries', async () => {
    app = Fastify();
    registerStatusRoute(app, { status: () => STATUS, token: TOKEN });
    for (const authorization of [undefined, '', TOKEN, `Bearer ${TOKEN.slice(1)}`, `Bearer ${TOKEN} `, `Basic ${TOKEN}`, `bearer ${TOKEN}x`]) {
      const res = await app.inject({ method: 'GET', url: '/status', headers: authorization === undefined ? {} : { authorization } });
      expect(res.statusCode, String(authorization)).toBe(401);
      expect(res.headers['www-authenticate']).toBe('Bearer realm="ctrlmesh-hub"');
      expect(res.body).not.toContain('eu-west-1');
    }
    const res = await app.inject({ method: 'GET', url: '/status', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(STATUS);
  });
});

describe('ctrlmesh status against a hub whose /status wants a token', () => {
  let app: FastifyInstance;
  afterEach(async () => app.close());

  const ctrlmesh = async (...argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> => {
    const out = { stdout: '', stderr: '' };
    const sink = (key: keyof typeof out): Writable =>
      new Writable({
        write(chunk: Buffer, _enc, done) {
          out[key] += chunk.toString();
          done();
        },
      });
    const code = await run([...argv, '--log-level', 'silent'], { stdout: sink('stdout'), stderr: sink('stderr'), env: {}, signal: new AbortController().signal });
    return { code, ...out };
  };

  it('says a token is wanted, and reads the status with --token-file', async () => {
    app = Fastify();
    registerStatusRoute(app, { status: () => STATUS, token: TOKEN });
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    const without = await ctrlmesh('status', '--hub', url);
    expect(without.code).not.toBe(0);
    expect(without.stderr).toContain(`the hub at ${url}/status wants a bearer token: give --token-file`);
    const file = join(mkdtempSync(join(tmpdir(), 'ctrlmesh-status-')), 'token');
    writeFileSync(file, `${TOKEN}\n`);
    const withToken = await ctrlmesh('status', '--hub', url, '--token-file', file);
    expect(withToken.stderr).toBe('');
    expect(withToken.stdout).toContain('hub hub-0 (leader)');
    expect(withToken.stdout).toContain('https://api.eu-west-1.example:6443');
  });
});
