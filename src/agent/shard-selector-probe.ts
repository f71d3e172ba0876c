import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { AgentMetrics } from '../metrics/index.js';
import { HASH_SPACE_END, NAMESPACE_FIELD, renderShardSelector } from '../sharding/index.js';

/**
 * Whether this cluster's API server filters lists and watches by `shardSelector` (KEP-5866, docs/shard-selectors.md).
 * Nothing in `/version` or discovery says so (the gate is alpha and off by default), so the agent asks: a list sent
 * with a selector spanning the whole hash space comes back with `metadata.shardInfo.selector` only where it is served.
 */
export const PROBE_SELECTOR = renderShardSelector(NAMESPACE_FIELD, [[0n, HASH_SPACE_END]]);

/** One namespace is enough: only the echo in the list's metadata matters. */
export const PROBE_PATH = `/api/v1/namespaces?limit=1&shardSelector=${encodeURIComponent(PROBE_SELECTOR)}`;

export const VERSION_PATH = '/version';

/** An answer of the API server: its HTTP status and its body as JSON (undefined when it is not JSON). */
export interface KubeAnswer {
  status: number;
  body: unknown;
}

/** A GET against the API server; rejects only when no answer came (network, TLS, timeout). */
export type KubeGet = (path: string, signal: AbortSignal) => Promise<KubeAnswer>;

function field(value: unknown, key: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[key] : undefined;
}

/**
 * Whether the probe's answer shows a filtered list (pure): a 2xx answer echoing a non-empty selector. A list without
 * the echo (before 1.36, or the gate off: the parameter is ignored) or a refusal that will not change (a 500
 * `invalid shard selector`, a 401 or 403) means the server does not offer shard selectors. An overloaded or failing
 * server (429, another 5xx) says nothing: undefined, so the agent asks again rather than label a cluster on a guess.
 */
export function offersShardSelectors(answer: KubeAnswer): boolean | undefined {
  if (answer.status === 429 || (answer.status >= 500 && !String(field(answer.body, 'message') ?? '').startsWith('invalid shard selector'))) {
    return undefined;
  }
  if (answer.status < 200 || answer.status >= 300) return false;
  const selector = field(field(field(answer.body, 'metadata'), 'shardInfo'), 'selector');
  return typeof selector === 'string' && selector !== '';
}

/** The `gitVersion` of a `/version` answer (pure), or undefined when it has none. */
export function gitVersionOf(answer: KubeAnswer): string | undefined {
  if (answer.status < 200 || answer.status >= 300) return undefined;
  const version = field(answer.body, 'gitVersion');
  return typeof version === 'string' && version !== '' ? version : undefined;
}

const REQUEST_TIMEOUT_MS = 10_000;

/**
 * A GET through the kubeconfig's own connection settings: its server, CA, client certificate or token
 * (`applyToHTTPSOptions`), so the API server is verified exactly as the kube client verifies it. The generated
 * clients cannot send `shardSelector` (client-node 1.4 predates it), hence the raw request.
 */
export function kubeGetter(kc: KubeConfig): KubeGet {
  return async (path, signal) => {
    const server = kc.getCurrentCluster()?.server;
    if (!server) throw new Error('the kubeconfig has no current cluster');
    const base = new URL(server);
    // A server URL with a path prefix (a proxy in front of the API server) keeps it.
    const url = new URL(base.pathname.replace(/\/$/, '') + path, base);
    const options: https.RequestOptions = { method: 'GET', headers: { accept: 'application/json' }, timeout: REQUEST_TIMEOUT_MS, signal };
    // Fills in the CA, client certificate, token and an agent (through the kubeconfig's proxy-url, if any).
    await kc.applyToHTTPSOptions(options);
    return new Promise<KubeAnswer>((resolve, reject) => {
      const req = https.request(url, options, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          let body: unknown;
          try {
            body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          } catch {
            body = undefined;
          }
          resolve({ status: res.statusCode ?? 0, body });
        });
      });
      req.on('timeout', () => req.destroy(new Error(`no answer from the API server within ${REQUEST_TIMEOUT_MS} ms`)));
      req.on('error', reject);
      req.end();
    });
  };
}

export interface ShardSelectorProbeOptions {
  get: KubeGet;
  logger: Logger;
  metrics: Pick<AgentMetrics, 'shardSelectors'>;
  /** How often `/version` is read: the probe runs again when the API server's release changes (an upgrade). */
  intervalMs: number;
  /** Called after the first answer and after every change of it. */
  onChange: (offered: boolean) => void;
}

/**
 * Keeps `offered` up to date: probes at start and whenever `/version` names another release. Until a probe has
 * answered, the server is taken not to offer shard selectors (so everything stays labelled, the safe side); a probe
 * that gets no answer at all keeps the previous answer and is tried again on the next tick.
 */
export class ShardSelectorProbe {
  private current = false;
  /** The release the current answer was found on; undefined until a probe has answered. */
  private probedVersion: string | undefined;
  private probed = false;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly abort = new AbortController();

  constructor(private readonly options: ShardSelectorProbeOptions) {
    options.metrics.shardSelectors.set(0);
  }

  /** Whether the API server filters by shard selector, as last found. */
  get offered(): boolean {
    return this.current;
  }

  /** Whether a probe has answered yet: before that, `offered` is only the safe default. */
  get answered(): boolean {
    return this.probed;
  }

  start(): void {
    void this.tick();
    this.timer = setInterval(() => void this.tick(), this.options.intervalMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.abort.abort();
    await this.running;
  }

  /** One check, unless one is running: read `/version`, probe when the release differs from the probed one. */
  tick(): Promise<void> {
    this.running ??= this.check().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  private async check(): Promise<void> {
    const { get, logger } = this.options;
    const signal = this.abort.signal;
    let gitVersion: string | undefined;
    try {
      const answer = await get(VERSION_PATH, signal);
      gitVersion = gitVersionOf(answer);
      // An unreadable /version (an odd proxy, a 403) does not stop the probe; it just cannot tell upgrades apart.
      if (gitVersion === undefined) logger.debug({ status: answer.status }, 'API server /version named no gitVersion');
    } catch (err) {
      if (!signal.aborted) logger.warn({ err: (err as Error).message }, 'could not read the API server version; keeping the shard selector answer');
      return;
    }
    if (this.probed && gitVersion === this.probedVersion) return;
    let offered: boolean | undefined;
    let status = 0;
    try {
      const answer = await get(PROBE_PATH, signal);
      status = answer.status;
      offered = offersShardSelectors(answer);
    } catch (err) {
      if (!signal.aborted) logger.warn({ err: (err as Error).message, gitVersion }, 'could not ask the API server for shard selectors; keeping the previous answer');
      return;
    }
    if (offered === undefined) {
      logger.warn({ status, gitVersion }, 'the API server could not answer the shard selector probe now; keeping the previous answer');
      return;
    }
    if (signal.aborted) return;
    const first = !this.probed;
    const changed = offered !== this.current;
    this.probed = true;
    this.probedVersion = gitVersion;
    this.current = offered;
    this.options.metrics.shardSelectors.set(offered ? 1 : 0);
    if (first || changed) logger.info({ shardSelectors: offered, gitVersion }, 'API server shard selectors');
    if (first || changed) this.options.onChange(offered);
  }
}
