import { execFile } from 'node:child_process';
import { request } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { CustomObjectsApi, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { pino } from 'pino';
import { Agent, request as undiciRequest } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_NAMESPACE, DEMO_OPERATOR, startDemoMesh, type DemoMesh } from '../../src/demo/index.js';
import { startPrometheus, type PrometheusHandle, type ScrapeTarget } from '../../src/dev/index.js';
import { dashboardQueries, executableQuery } from '../helpers/dashboard-queries.js';
import { DEMO_RULES } from '../../src/cli/commands/demo.js';

/** A GET sent through an HTTP proxy (absolute-form request line); resolves the status code. */
function egressGet(proxyUrl: string, target: string): Promise<number> {
  const proxy = new URL(proxyUrl);
  return new Promise((resolve, reject) => {
    const req = request({ host: proxy.hostname, port: proxy.port, method: 'GET', path: target, headers: { host: new URL(target).host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.end();
  });
}

/** An AdmissionReview of a ConfigMap in `namespace` sent to a proxy's webhook listener; resolves the status code. */
async function admissionReview(mesh: DemoMesh, url: string, namespace: string): Promise<number> {
  const dispatcher = new Agent({ connect: { ca: mesh.webhook?.caPem, servername: mesh.webhook?.serverName } });
  const request = { uid: `review-${namespace}`, kind: { group: '', version: 'v1', kind: 'ConfigMap' }, namespace, name: 'settings', operation: 'CREATE', object: { metadata: { name: 'settings', namespace } } };
  const body = JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request });
  const answer = await undiciRequest(`${url}/validate`, { method: 'POST', dispatcher, headers: { 'content-type': 'application/json' }, body });
  await answer.body.dump();
  await dispatcher.close();
  return answer.statusCode;
}

const run = promisify(execFile);
const SCRAPE_SECONDS = 1;
const logger = pino({ level: process.env.CTRLMESH_TEST_LOG ?? 'silent' });

/** Every /metrics of the mesh, with the target labels a ServiceMonitor of the charts would give them. */
function targets(mesh: DemoMesh): ScrapeTarget[] {
  return [
    { job: 'ctrlmesh-hub', metricsUrl: `${mesh.hubUrl}/metrics` },
    ...mesh.agents.map((a) => ({ job: 'ctrlmesh-agent', metricsUrl: `${a.url}/metrics`, labels: { cluster: a.cluster } })),
    ...mesh.shards.map((s) => ({ job: 'ctrlmesh-proxy', metricsUrl: `${s.opsUrl}/metrics`, labels: { shard: s.name } })),
  ];
}

describe('dashboards against a real Prometheus scraping a running hub, agents and proxies', () => {
  let dir: string;
  let mesh: DemoMesh;
  let prometheus: PrometheusHandle;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctrlmesh-dashboards-'));
    const rules = join(dir, 'rules.yaml');
    await writeFile(rules, DEMO_RULES);
    mesh = await startDemoMesh({
      dir: join(dir, 'mesh'),
      clusters: 2,
      shards: 3,
      workloadNamespaces: 4,
      ruleFiles: [rules],
      webhook: true,
      onProgress: (m) => logger.info(m),
      logger,
    });
    prometheus = await startPrometheus({ dir: join(dir, 'prometheus'), targets: targets(mesh), scrapeIntervalSeconds: SCRAPE_SECONDS, logger });
  }, 240_000);

  afterAll(async () => {
    await prometheus?.stop();
    await mesh?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('promtool check metrics passes on every /metrics', async () => {
    for (const target of targets(mesh)) {
      const text = await (await fetch(target.metricsUrl)).text();
      const checked = await new Promise<{ code: number | null; out: string }>((resolve) => {
        const child = execFile('/usr/bin/promtool', ['check', 'metrics'], (err, stdout, stderr) =>
          resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: `${stdout}${stderr}` }),
        );
        child.stdin?.end(text);
      });
      expect(checked, `${target.job} ${target.metricsUrl}`).toEqual({ code: 0, out: '' });
    }
  });

  it('every dashboard query returns at least one series', async () => {
    const queries = await dashboardQueries('dashboards');
    // Events the steady mesh never has: a handover (one shard fewer: its units move to the others, which serve, and
    // its proxy ends the watches of the revoked buckets) and an external call the traffic rules refuse.
    const kc = new KubeConfig();
    kc.loadFromFile(mesh.bed.info.clusters[0]?.kubeconfigPath as string);
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
      {
        group: 'ctrlmesh.kusionstack.io',
        version: 'v1alpha1',
        namespace: DEMO_NAMESPACE,
        plural: 'shardingconfigs',
        name: DEMO_OPERATOR.split('/')[1] as string,
        body: { spec: { root: { auto: { shardingSize: 2, everyShardReplicas: 1 } } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    const refused = await egressGet(mesh.shards[0]?.egressUrl as string, 'http://127.0.0.1:9/blocked');
    expect(refused).toBe(403);
    // Admission reviews through one proxy's webhook listener: its own buckets answered by its operator, the others'
    // owned by shards with no pod to reach (the demo runs no pods), so answered 503.
    const codes = await Promise.all(Array.from({ length: 32 }, (_, i) => admissionReview(mesh, mesh.shards[0]?.webhookUrl as string, `review-${i}`)));
    expect(codes).toContain(200);
    expect(codes).toContain(503);
    // Rates need two samples of each series inside the window: wait for a few scrapes of the running mesh.
    const empty: string[] = [];
    for (let attempt = 0; attempt < 60; attempt++) {
      empty.length = 0;
      for (const q of queries) {
        const result = await prometheus.query(executableQuery(q.expr, `${SCRAPE_SECONDS * 15}s`));
        if (result.length === 0) empty.push(`${q.dashboard} / ${q.where}: ${q.expr}`);
      }
      if (empty.length === 0) break;
      await sleep(1000);
    }
    expect(empty).toEqual([]);
  }, 180_000);

  it('the Prometheus package runs the check tools this test relies on', async () => {
    const { stdout } = await run('/usr/bin/promtool', ['--version']);
    expect(stdout).toMatch(/promtool, version 2\./);
  });
});
