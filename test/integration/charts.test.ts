import { execFile, spawn } from 'node:child_process';
import { readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { resolveTool } from '../../src/dev/index.js';
import { cluster, uniqueName } from './helpers/testbed.js';

const run = promisify(execFile);
const CHARTS_DIR = 'charts';
const charts = readdirSync(CHARTS_DIR).filter((name) => existsSync(join(CHARTS_DIR, name, 'Chart.yaml')));

/** Every chart with its default values, then with each example values file under ci/. */
const cases = charts.flatMap((chart) => {
  const ci = join(CHARTS_DIR, chart, 'ci');
  const examples = existsSync(ci) ? readdirSync(ci).filter((f) => f.endsWith('.yaml')) : [];
  return [
    { chart, label: 'default values', values: undefined as string | undefined },
    ...examples.map((f) => ({ chart, label: f, values: join(ci, f) })),
  ];
});

let helm = '';
let kubectl = '';
const kubeconfig = (): string => cluster(1).kubeconfigPath;

/** Pipes `helm template` into `kubectl apply --dry-run=server`, as a user checking a chart against a cluster would. */
async function dryRun(args: { chart: string; values?: string; namespace: string }): Promise<string> {
  const rendered = await run(
    helm,
    ['template', 'ctrlmesh', join(CHARTS_DIR, args.chart), '--namespace', args.namespace, '--include-crds', ...(args.values ? ['-f', args.values] : [])],
    { maxBuffer: 16 * 1024 * 1024 },
  );
  return new Promise((resolve, reject) => {
    const child = spawn(kubectl, ['--kubeconfig', kubeconfig(), '--namespace', args.namespace, 'apply', '--dry-run=server', '-f', '-'], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`kubectl apply --dry-run=server exited ${code}:\n${out}`))));
    child.stdin.end(rendered.stdout);
  });
}

describe('Helm charts', () => {
  beforeAll(async () => {
    // helm is built once into the tool cache (minutes the first time); the build reports its progress.
    const onProgress = (m: string): void => void process.stderr.write(`charts: ${m}\n`);
    helm = (await resolveTool('helm', { onProgress })).path;
    kubectl = (await resolveTool('kubectl', { onProgress })).path;
    await run(kubectl, ['--kubeconfig', kubeconfig(), 'apply', '-f', 'test/integration/fixtures/servicemonitor-crd.yaml']);
  }, 900_000);

  it.each(charts)('%s passes helm lint, with default and example values', async (chart) => {
    const ci = join(CHARTS_DIR, chart, 'ci');
    const valueFiles = existsSync(ci) ? readdirSync(ci).map((f) => join(ci, f)) : [];
    for (const values of [undefined, ...valueFiles]) {
      const { stdout } = await run(helm, ['lint', '--strict', join(CHARTS_DIR, chart), ...(values ? ['-f', values] : [])]);
      expect(stdout).toContain('0 chart(s) failed');
    }
  });

  it.each(cases)('$chart with $label renders objects a real API server accepts', async ({ chart, values }) => {
    const namespace = uniqueName('chart');
    await run(kubectl, ['--kubeconfig', kubeconfig(), 'create', 'namespace', namespace]);
    try {
      const out = await dryRun({ chart, namespace, ...(values ? { values } : {}) });
      expect(out).toMatch(/deployment\.apps\/ctrlmesh-ctrlmesh-\w+ created \(server dry run\)/);
      expect(out).toMatch(/customresourcedefinition\.apiextensions\.k8s\.io\/shardingconfigs\.ctrlmesh\.kusionstack\.io \w+ \(server dry run\)/);
      if (values) expect(out).toMatch(/servicemonitor\.monitoring\.coreos\.com\/\S+ created \(server dry run\)/);
    } finally {
      await run(kubectl, ['--kubeconfig', kubeconfig(), 'delete', 'namespace', namespace, '--wait=false']);
    }
  });
});
