import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { DEMO_NAMESPACE, DEMO_OPERATOR, parseMetricsText, startDemoMesh } from '../../demo/index.js';
import type { HubStatus } from '../../hub/index.js';
import { FileError } from '../../errors.js';
import { durationValue, intValue, stringValue, type Command } from '../command.js';
import { renderDemoView, type ProxyScrape } from './demo-view.js';

// Mild protection rules every shard proxy loads, so the view has breakers, limits and faults to show.
export const DEMO_RULES = `apiVersion: ctrlmesh.kusionstack.io/v1alpha1
kind: CircuitBreaker
metadata: { name: demo-limits, namespace: ${DEMO_NAMESPACE} }
spec:
  rateLimitings:
    - name: configmap-writes
      resourceRules:
        - { apiGroups: [''], resources: [configmaps], verbs: [update, patch], namespaces: ['*'] }
      bucket: { burst: 2, interval: 1s, limit: 1 }
      triggerPolicy: LimiterOnly
  trafficInterceptRules:
    - name: no-blocked-calls
      interceptType: Blacklist
      contentType: Regexp
      contents: ['/blocked$']
      methods: [GET, POST]
---
apiVersion: ctrlmesh.kusionstack.io/v1alpha1
kind: FaultInjection
metadata: { name: demo-faults, namespace: ${DEMO_NAMESPACE} }
spec:
  httpFault:
    - name: slow-configmap-writes
      delay: { fixedDelay: 20ms, percent: "50" }
      match:
        resources:
          - { apiGroups: [''], resources: [configmaps], verbs: [update, patch], namespaces: ['*'] }
    - name: flaky-configmap-writes
      abort: { httpStatus: 503, percent: "10" }
      match:
        resources:
          - { apiGroups: [''], resources: [configmaps], verbs: [update, patch], namespaces: ['*'] }
`;

/** Marks a directory as the demo's, so a later run may empty it and never empties anything else. */
const MARKER = '.ctrlmesh-demo';

async function emptyDemoDir(dir: string): Promise<void> {
  const entries: string[] = await readdir(dir).catch(() => []);
  if (entries.length > 0 && !entries.includes(MARKER)) {
    throw new FileError(dir, 'is not empty and not a directory of an earlier demo; give --dir an empty or new directory');
  }
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, MARKER), 'state and logs of `ctrlmesh demo`; emptied by the next run\n');
}

async function scrape(shard: string, opsUrl: string): Promise<ProxyScrape> {
  const at = Date.now();
  try {
    const res = await fetch(`${opsUrl}/metrics`, { signal: AbortSignal.timeout(2_000) });
    return { shard, at, samples: res.ok ? parseMetricsText(await res.text()) : undefined };
  } catch {
    return { shard, at, samples: undefined };
  }
}

async function hubStatus(hubUrl: string): Promise<HubStatus | undefined> {
  try {
    const res = await fetch(`${hubUrl}/status`, { signal: AbortSignal.timeout(2_000) });
    return res.ok ? ((await res.json()) as HubStatus) : undefined;
  } catch {
    return undefined;
  }
}

export const demoCommand: Command = {
  name: 'demo',
  summary: 'Run the mesh locally with a live view: 2 clusters, the hub, an agent each, a sharded sample operator; Ctrl-C stops it all.',
  usage: '[--shards N] [--dir DIR] [--refresh DURATION]',
  details: [
    'Starts the test bed (etcd, two kube-apiservers, NATS), the hub, one agent per cluster, and the sample operator',
    `as N shards, each behind its own proxy, for an auto-sharding root (${DEMO_OPERATOR}) spanning both clusters.`,
    'The view shows which shard owns which (cluster, bucket) units, each proxy\'s request rate and breaker state',
    'per cluster, and its rate-limited requests and injected faults. Logs of every process are under DIR.',
  ].join('\n'),
  options: {
    shards: { type: 'string', valueName: 'N', description: 'shards of the sample operator (default 3)' },
    dir: { type: 'string', valueName: 'DIR', description: 'state and logs (default .ctrlmesh/demo; a demo directory is emptied at start)' },
    refresh: { type: 'string', valueName: 'DURATION', description: 'view refresh interval (default 1s)' },
  },
  run: async (ctx) => {
    const shards = intValue(ctx, 'shards', 3, { minimum: 1, maximum: 8 });
    const refreshMs = durationValue(ctx, 'refresh', 1000, { minimum: 100, maximum: 60_000 });
    const dir = resolve(stringValue(ctx, 'dir') ?? join('.ctrlmesh', 'demo'));
    const workloadNamespaces = 8;
    await emptyDemoDir(dir);
    const rules = join(dir, 'rules.yaml');
    await writeFile(rules, DEMO_RULES);
    const started = Date.now();
    const mesh = await startDemoMesh({
      dir,
      clusters: 2,
      shards,
      workloadNamespaces,
      ruleFiles: [rules],
      onProgress: (m) => ctx.logger.info(m),
      logger: ctx.logger,
      signal: ctx.signal,
    });
    ctx.logger.info({ seconds: Math.round((Date.now() - started) / 1000), dir }, 'demo running; Ctrl-C stops it');
    const clusters = mesh.bed.info.clusters.map((c) => c.name);
    const inPlace = (ctx.stdout as NodeJS.WriteStream).isTTY === true;
    let previous = new Map<string, ProxyScrape>();
    while (!ctx.signal.aborted) {
      const [status, scrapes] = await Promise.all([hubStatus(mesh.hubUrl), Promise.all(mesh.shards.map((s) => scrape(s.name, s.opsUrl)))]);
      const view = renderDemoView({
        title: `ControllerMesh demo: ${clusters.length} clusters, ${shards} shards of ${DEMO_OPERATOR} (logs in ${dir}; Ctrl-C stops everything)`,
        clusters,
        status,
        proxies: scrapes.map((now) => ({ now, before: previous.get(now.shard) })),
      });
      // In a terminal the view is redrawn in place; elsewhere each refresh is printed after the last.
      ctx.stdout.write(inPlace ? `\x1b[H\x1b[J${view}` : `${view}\n`);
      previous = new Map(scrapes.map((s) => [s.shard, s]));
      await sleep(refreshMs, undefined, { signal: ctx.signal }).catch(() => undefined);
    }
    ctx.logger.info('stopping the demo');
    await mesh.stop();
    ctx.logger.info('demo stopped: every process is gone');
    return 0;
  },
};
