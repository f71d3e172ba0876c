import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  PROBE_PATH,
  PROBE_SELECTOR,
  ShardSelectorProbe,
  VERSION_PATH,
  gitVersionOf,
  kubeGetter,
  offersShardSelectors,
  type KubeAnswer,
} from '../../../src/agent/shard-selector-probe.js';
import { createAgentMetrics } from '../../../src/metrics/index.js';
import { createCertificateAuthority, issueCertificate } from '../../../src/tls/index.js';

/** The echo a v1.37 server with ShardedListAndWatch on sends back (docs/shard-selectors.md). */
const ECHO = "shardRange(object.metadata.namespace, '0x0000000000000000', '0x10000000000000000')";

describe('the probe request', () => {
  it('asks for one namespace through a selector spanning the whole hash space, in the spelling the server echoes', () => {
    expect(PROBE_SELECTOR).toBe(ECHO);
    const url = new URL(PROBE_PATH, 'https://api.example:6443');
    expect(url.pathname).toBe('/api/v1/namespaces');
    expect(url.searchParams.get('limit')).toBe('1');
    expect(url.searchParams.get('shardSelector')).toBe(ECHO);
    // Encoded: no space or comma of the selector reaches the server raw (quotes may, they are valid in a query).
    expect(PROBE_PATH).not.toMatch(/[ ,]/);
  });
});

describe('offersShardSelectors', () => {
  const list = (metadata: unknown): KubeAnswer => ({ status: 200, body: { kind: 'NamespaceList', metadata, items: [] } });

  it('is true for a list that echoes a selector', () => {
    expect(offersShardSelectors(list({ resourceVersion: '7', shardInfo: { selector: ECHO } }))).toBe(true);
  });

  it('is false for a list without the echo (before 1.36, or the gate off: the parameter is ignored)', () => {
    expect(offersShardSelectors(list({ resourceVersion: '7' }))).toBe(false);
    expect(offersShardSelectors(list({ shardInfo: {} }))).toBe(false);
    expect(offersShardSelectors(list({ shardInfo: { selector: '' } }))).toBe(false);
    expect(offersShardSelectors(list({ shardInfo: { selector: 3 } }))).toBe(false);
    expect(offersShardSelectors(list(undefined))).toBe(false);
    expect(offersShardSelectors({ status: 200, body: undefined })).toBe(false);
    expect(offersShardSelectors({ status: 200, body: 'not json' })).toBe(false);
  });

  it('is false for a refusal that will not change, even one that carries an echo', () => {
    const refused = { kind: 'Status', status: 'Failure', message: 'invalid shard selector: hexStart must be ...', code: 500 };
    expect(offersShardSelectors({ status: 500, body: refused })).toBe(false);
    expect(offersShardSelectors({ status: 403, body: { metadata: { shardInfo: { selector: ECHO } } } })).toBe(false);
  });

  it('says nothing (undefined) for an overloaded or failing server: the agent must ask again, not label on a guess', () => {
    expect(offersShardSelectors({ status: 429, body: { kind: 'Status', message: 'too many requests' } })).toBeUndefined();
    expect(offersShardSelectors({ status: 503, body: undefined })).toBeUndefined();
    expect(offersShardSelectors({ status: 500, body: { kind: 'Status', message: 'etcdserver: request timed out' } })).toBeUndefined();
  });
});

describe('gitVersionOf', () => {
  it('reads gitVersion from a /version answer, and nothing from an error or an odd body', () => {
    expect(gitVersionOf({ status: 200, body: { major: '1', minor: '37', gitVersion: 'v1.37.2' } })).toBe('v1.37.2');
    expect(gitVersionOf({ status: 200, body: { major: '1' } })).toBeUndefined();
    expect(gitVersionOf({ status: 200, body: null })).toBeUndefined();
    expect(gitVersionOf({ status: 403, body: { gitVersion: 'v1.37.2' } })).toBeUndefined();
  });
});

/** A fake API server: `/version` answers `version`; the probe answers with or without the echo, or fails. */
function fakeServer(initial: { version: string; offers: boolean | 'down' | 'refuses' }) {
  const state = { ...initial, versionDown: false };
  const calls: string[] = [];
  const get = async (path: string): Promise<KubeAnswer> => {
    calls.push(path);
    if (path === VERSION_PATH) {
      if (state.versionDown) throw new Error('connect ECONNREFUSED');
      return { status: 200, body: { gitVersion: state.version } };
    }
    if (path !== PROBE_PATH) throw new Error(`unexpected ${path}`);
    if (state.offers === 'down') throw new Error('socket hang up');
    if (state.offers === 'refuses') return { status: 500, body: { kind: 'Status', message: 'invalid shard selector: ...' } };
    return { status: 200, body: { metadata: state.offers ? { shardInfo: { selector: ECHO } } : {}, items: [] } };
  };
  return { state, calls, get };
}

function probeOf(server: ReturnType<typeof fakeServer>) {
  const metrics = createAgentMetrics(new Registry());
  const changes: boolean[] = [];
  const probe = new ShardSelectorProbe({ get: server.get, logger: pino({ level: 'silent' }), metrics, intervalMs: 60_000, onChange: (o) => changes.push(o) });
  const gauge = async (): Promise<number | undefined> => (await metrics.shardSelectors.get()).values[0]?.value;
  return { probe, changes, gauge };
}

describe('ShardSelectorProbe', () => {
  it('assumes no shard selectors until a probe answers, then probes again only when the release changes', async () => {
    const server = fakeServer({ version: 'v1.33.13', offers: false });
    const { probe, changes, gauge } = probeOf(server);
    expect(probe.offered).toBe(false);
    expect(probe.answered).toBe(false);
    expect(await gauge()).toBe(0);

    await probe.tick();
    expect(probe.offered).toBe(false);
    // The first answer is told even when it is the assumed one: the agent labels nothing until it knows.
    expect(probe.answered).toBe(true);
    expect(changes).toEqual([false]);
    expect(server.calls).toEqual([VERSION_PATH, PROBE_PATH]);

    await probe.tick();
    expect(server.calls).toEqual([VERSION_PATH, PROBE_PATH, VERSION_PATH]);

    // Upgraded, gate on: the next tick probes again and tells.
    Object.assign(server.state, { version: 'v1.37.2', offers: true });
    await probe.tick();
    expect(probe.offered).toBe(true);
    expect(changes).toEqual([false, true]);
    expect(await gauge()).toBe(1);
    expect(server.calls.slice(3)).toEqual([VERSION_PATH, PROBE_PATH]);
  });

  it('tells a first answer of yes at once', async () => {
    const { probe, changes, gauge } = probeOf(fakeServer({ version: 'v1.37.2', offers: true }));
    await probe.tick();
    expect(probe.offered).toBe(true);
    expect(changes).toEqual([true]);
    expect(await gauge()).toBe(1);
  });

  it('takes a refused selector as no, and a probe without an answer as unknown: the previous answer stays and it is retried', async () => {
    const server = fakeServer({ version: 'v1.37.2', offers: true });
    const { probe, changes } = probeOf(server);
    await probe.tick();
    expect(probe.offered).toBe(true);

    // Same release: not probed again, whatever the server would say now.
    server.state.offers = 'refuses';
    await probe.tick();
    expect(probe.offered).toBe(true);

    // Another release, but the probe gets no answer: keep yes, and retry on the next tick.
    Object.assign(server.state, { version: 'v1.37.3', offers: 'down' });
    await probe.tick();
    expect(probe.offered).toBe(true);
    // /version unreachable: nothing is decided either.
    server.state.versionDown = true;
    await probe.tick();
    expect(probe.offered).toBe(true);

    Object.assign(server.state, { versionDown: false, offers: 'refuses' });
    await probe.tick();
    expect(probe.offered).toBe(false);
    expect(changes).toEqual([true, false]);
  });

  it('runs one check at a time', async () => {
    const server = fakeServer({ version: 'v1.37.2', offers: true });
    const { probe } = probeOf(server);
    await Promise.all([probe.tick(), probe.tick()]);
    expect(server.calls).toEqual([VERSION_PATH, PROBE_PATH]);
    await probe.stop();
  });
});

describe('kubeGetter', () => {
  let server: Server;
  let url: string;
  let caPem: string;
  let otherCaPem: string;
  const seen: { url?: string; authorization?: string }[] = [];

  beforeAll(async () => {
    const ca = await createCertificateAuthority({ commonName: 'kube-ca' });
    caPem = ca.certPem;
    otherCaPem = (await createCertificateAuthority({ commonName: 'other-ca' })).certPem;
    const tls = await issueCertificate({ ca, commonName: 'localhost', ipAddresses: ['127.0.0.1'], usage: 'server' });
    server = createServer({ cert: tls.certPem, key: tls.keyPem }, (req, res) => {
      seen.push({ url: req.url, authorization: req.headers.authorization });
      res.setHeader('content-type', 'application/json');
      if (req.url?.endsWith('/version')) res.end(JSON.stringify({ gitVersion: 'v1.37.2' }));
      else res.end(JSON.stringify({ kind: 'NamespaceList', metadata: { shardInfo: { selector: ECHO } }, items: [] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const kubeConfig = (server: string, ca: string): KubeConfig => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server, caData: Buffer.from(ca).toString('base64') }],
      users: [{ name: 'u', token: 'secret-token' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    return kc;
  };

  it("sends the kubeconfig's credentials over TLS verified with its CA, keeping a server path prefix", async () => {
    const get = kubeGetter(kubeConfig(`${url}/prefix/`, caPem));
    const answer = await get(PROBE_PATH, AbortSignal.timeout(5_000));
    expect(offersShardSelectors(answer)).toBe(true);
    const sent = new URL(seen.at(-1)?.url ?? '', url);
    expect([sent.pathname, sent.searchParams.get('shardSelector'), seen.at(-1)?.authorization]).toEqual(['/prefix/api/v1/namespaces', ECHO, 'Bearer secret-token']);
    expect(gitVersionOf(await kubeGetter(kubeConfig(url, caPem))(VERSION_PATH, AbortSignal.timeout(5_000)))).toBe('v1.37.2');
  });

  it('refuses a server its CA did not sign: no answer, not a no', async () => {
    const before = seen.length;
    await expect(kubeGetter(kubeConfig(url, otherCaPem))(VERSION_PATH, AbortSignal.timeout(5_000))).rejects.toThrow();
    expect(seen.length).toBe(before);
  });
});
