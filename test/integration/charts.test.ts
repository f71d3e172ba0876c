import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { readOperatorFile } from '../../src/cli/commands/flags.js';
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

/** `helm template` of a chart, as a user would run it. */
async function template(args: { chart: string; values?: string; set?: string[]; namespace: string; crds?: boolean }): Promise<string> {
  const { stdout } = await run(
    helm,
    [
      'template',
      'ctrlmesh',
      join(CHARTS_DIR, args.chart),
      '--namespace',
      args.namespace,
      ...(args.crds ? ['--include-crds'] : []),
      ...(args.values ? ['-f', args.values] : []),
      ...(args.set ?? []).flatMap((s) => ['--set', s]),
    ],
    { maxBuffer: 16 * 1024 * 1024 },
  );
  return stdout;
}

/** Runs kubectl with `input` on its stdin; resolves its stdout and stderr together, rejects on a non-zero exit. */
function kubectlWithInput(args: string[], input: string): Promise<{ stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(kubectl, ['--kubeconfig', kubeconfig(), ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve({ stdout, stderr }) : reject(new Error(`kubectl ${args.join(' ')} exited ${code}:\n${stdout}${stderr}`))));
    child.stdin.end(input);
  });
}

/** Pipes `helm template` into `kubectl apply --dry-run=server`, as a user checking a chart against a cluster would. */
async function dryRun(args: { chart: string; values?: string; namespace: string }): Promise<{ rendered: string; out: string }> {
  const rendered = await template({ ...args, crds: true });
  const { stdout, stderr } = await kubectlWithInput(['--namespace', args.namespace, 'apply', '--dry-run=server', '-f', '-'], rendered);
  return { rendered, out: stdout + stderr };
}

interface RenderedObject {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  rules?: { apiGroups?: string[]; resources?: string[]; resourceNames?: string[]; verbs?: string[] }[];
  spec?: {
    /** A NetworkPolicy's. */
    podSelector?: unknown;
    policyTypes?: string[];
    ingress?: unknown[];
    /** A Service's. */
    ports?: { name: string; port: number }[];
    template?: {
      metadata?: { annotations?: Record<string, string> };
      spec?: {
        securityContext?: { fsGroup?: number };
        volumes?: { name: string; configMap?: { name: string }; projected?: { defaultMode?: number; sources?: { secret?: { name: string; items?: { key: string; path: string }[] } }[] } }[];
        containers?: { args?: string[]; volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[] }[];
      };
    };
  };
}

/** Top-level JSON documents written one after another (kubectl prints one per object). */
function jsonDocuments(text: string): unknown[] {
  const docs: unknown[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i += 1;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') {
      if (depth === 0) start = i;
      depth += 1;
    } else if (c === '}') {
      depth -= 1;
      if (depth === 0) docs.push(JSON.parse(text.slice(start, i + 1)));
    }
  }
  return docs;
}

/** The chart's objects as JSON: there is no YAML parser here, so kubectl reads the YAML (client-side only). */
async function renderedObjects(args: { chart: string; values?: string; set?: string[]; namespace: string }): Promise<RenderedObject[]> {
  const { stdout } = await kubectlWithInput(['--namespace', args.namespace, 'create', '--dry-run=client', '-o', 'json', '-f', '-'], await template(args));
  return jsonDocuments(stdout).flatMap((doc) => ((doc as { kind?: string }).kind === 'List' ? (doc as { items: RenderedObject[] }).items : [doc as RenderedObject]));
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
      const { rendered, out } = await dryRun({ chart, namespace, ...(values ? { values } : {}) });
      // NATS runs as a StatefulSet (stable names for its routes); the hub and the agent as Deployments, with the CRDs.
      if (chart === 'ctrlmesh-nats') {
        expect(out).toMatch(/statefulset\.apps\/ctrlmesh-ctrlmesh-nats created \(server dry run\)/);
      } else {
        expect(out).toMatch(/deployment\.apps\/ctrlmesh-ctrlmesh-\w+ created \(server dry run\)/);
        expect(out).toMatch(/customresourcedefinition\.apiextensions\.k8s\.io\/shardingconfigs\.ctrlmesh\.kusionstack\.io \w+ \(server dry run\)/);
      }
      if (/^kind: ServiceMonitor$/m.test(rendered)) expect(out).toMatch(/servicemonitor\.monitoring\.coreos\.com\/\S+ created \(server dry run\)/);
    } finally {
      await run(kubectl, ['--kubeconfig', kubeconfig(), 'delete', 'namespace', namespace, '--wait=false']);
    }
  });

  it.each(cases)('$chart with $label: no ClusterRole holds a "*" group, resource or verb, nor reads Secrets', async ({ chart, values }) => {
    const objects = await renderedObjects({ chart, namespace: 'ctrlmesh-system', ...(values ? { values } : {}) });
    const roles = objects.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role');
    // The hub and NATS call no Kubernetes API and the aggregated roles belong to the agent chart: they render no role.
    if (chart !== 'ctrlmesh-agent') expect(roles.map((r) => r.metadata.name)).toEqual([]);
    else expect(roles.length).toBeGreaterThan(0);
    for (const role of roles) {
      for (const rule of role.rules ?? []) {
        const where = `${role.kind} ${role.metadata.name}: ${JSON.stringify(rule)}`;
        for (const field of [rule.apiGroups, rule.resources, rule.resourceNames, rule.verbs]) expect(field ?? [], where).not.toContain('*');
        expect(rule.resources ?? [], where).not.toContain('secrets');
        expect(rule.verbs?.length ?? 0, where).toBeGreaterThan(0);
      }
    }
  });

  const withSecrets = (chart: string): string => join(CHARTS_DIR, chart, 'ci', 'example-values.yaml');

  it('the agent ClusterRole grants exactly the calls the agent makes, and list/watch/patch only of rbac.relatedResources', async () => {
    const objects = await renderedObjects({ chart: 'ctrlmesh-agent', namespace: 'ctrlmesh-system', values: withSecrets('ctrlmesh-agent') });
    // The agent's own ClusterRole (the others are the aggregated roles, tested below).
    const role = objects.find((o) => o.kind === 'ClusterRole' && o.metadata.name === 'ctrlmesh-ctrlmesh-agent');
    const grants = (role?.rules ?? []).flatMap((r) =>
      (r.apiGroups ?? []).flatMap((g) => (r.resources ?? []).map((res) => `${g}/${res}${r.resourceNames ? `[${r.resourceNames.join(',')}]` : ''}: ${(r.verbs ?? []).join(',')}`)),
    );
    const crds = 'shardingconfigs.ctrlmesh.kusionstack.io,circuitbreakers.ctrlmesh.kusionstack.io,faultinjections.ctrlmesh.kusionstack.io';
    expect(grants.sort()).toEqual(
      [
        'ctrlmesh.kusionstack.io/shardingconfigs: list,watch',
        'ctrlmesh.kusionstack.io/circuitbreakers: list,watch',
        'ctrlmesh.kusionstack.io/faultinjections: list,watch',
        'ctrlmesh.kusionstack.io/shardingconfigs/status: patch',
        'ctrlmesh.kusionstack.io/circuitbreakers/status: patch',
        'ctrlmesh.kusionstack.io/faultinjections/status: patch',
        '/namespaces: list,watch,patch',
        '/pods: list,watch',
        'admissionregistration.k8s.io/mutatingwebhookconfigurations[ctrlmesh-agent-eu-west-1]: get,update,delete',
        'admissionregistration.k8s.io/mutatingwebhookconfigurations: create',
        `apiextensions.k8s.io/customresourcedefinitions[${crds}]: get,update`,
        // rbac.relatedResources of the example values.
        '/configmaps: list,watch,patch',
        '/services: list,watch,patch',
        'apps/deployments: list,watch,patch',
      ].sort(),
    );
  });

  it.each(['ctrlmesh-hub', 'ctrlmesh-agent'])('%s takes every credential from existing Secrets, mounted read-only, mode 0400', async (chart) => {
    const objects = await renderedObjects({ chart, namespace: 'ctrlmesh-system', values: withSecrets(chart) });
    // Nothing secret is rendered from values: the chart creates no Secret with these values.
    expect(objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name)).toEqual([]);
    const pod = objects.find((o) => o.kind === 'Deployment')?.spec?.template?.spec;
    expect(pod?.securityContext?.fsGroup).toBe(1000);
    const credentials = pod?.volumes?.find((v) => v.name === 'credentials');
    expect(credentials?.projected?.defaultMode).toBe(0o400);
    const projected = Object.fromEntries(
      (credentials?.projected?.sources ?? []).flatMap((s) => (s.secret?.items ?? []).map((i) => [i.path, `${s.secret?.name ?? ''}/${i.key}`])),
    );
    const [container] = pod?.containers ?? [];
    expect(container?.volumeMounts).toContainEqual({ name: 'credentials', mountPath: '/etc/ctrlmesh/credentials', readOnly: true });
    const dir = '/etc/ctrlmesh/credentials';
    if (chart === 'ctrlmesh-hub') {
      expect(projected).toEqual({
        'nats-ca.crt': 'nats-server-tls/ca.crt',
        'hub.creds': 'ctrlmesh-hub-creds/hub.creds',
        'route-signing.nk': 'ctrlmesh-hub-signing/route-signing.nk',
        'issuer.nk': 'ctrlmesh-hub-issuer/issuer.nk',
        tokens: 'ctrlmesh-hub-tokens/tokens',
        'status-token': 'ctrlmesh-hub-status/token',
      });
      expect(container?.args).toEqual(
        expect.arrayContaining([
          `--nats-ca=${dir}/nats-ca.crt`,
          `--nats-creds=${dir}/hub.creds`,
          `--signing-key=${dir}/route-signing.nk`,
          `--agent-issuer=${dir}/issuer.nk`,
          '--agent-identity-ttl=12h',
          `--token-file=${dir}/tokens`,
          // /status behind its token, on every address.
          '--status-listen=0.0.0.0:9465',
          `--status-token-file=${dir}/status-token`,
          '--operator-file=/etc/ctrlmesh/operators/operators',
          '--move-units-of-offline-clusters',
          // extraArgs: durations with their units (ctrlmesh hub refuses a bare number)
          '--unknown-after=10s',
          '--offline-after=1m',
        ]),
      );
    } else {
      expect(projected).toEqual({
        'nats-ca.crt': 'nats-server-tls/ca.crt',
        'bootstrap.creds': 'ctrlmesh-agent-bootstrap/bootstrap.creds',
        token: 'ctrlmesh-bootstrap-token/token',
      });
      expect(container?.args).toEqual(
        expect.arrayContaining([
          `--nats-ca=${dir}/nats-ca.crt`,
          `--nats-creds=${dir}/bootstrap.creds`,
          `--token-file=${dir}/token`,
          '--proxy-route-signer=NBPOJEWWRNW26SIZOHWN6N3L2VP7ULAAM5QMTRROJVYPWFDTFIT6U4KK',
          '--proxy-secret=operator-proxy',
        ]),
      );
    }
  });

  it("the hub chart's operators value is the hub's --operator-file, read as the hub reads it; a change rolls the hubs", async () => {
    const objects = await renderedObjects({ chart: 'ctrlmesh-hub', namespace: 'ctrlmesh-system', values: withSecrets('ctrlmesh-hub') });
    const configMap = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'ctrlmesh-ctrlmesh-hub-operators');
    const file = join(mkdtempSync(join(tmpdir(), 'ctrlmesh-operators-')), 'operators');
    writeFileSync(file, configMap?.data?.operators ?? '');
    expect(readOperatorFile(file)).toEqual([{ operator: 'operator-demo/demo', clusters: ['eu-west-1', 'eu-west-2'] }]);
    const pod = objects.find((o) => o.kind === 'Deployment')?.spec?.template;
    expect(pod?.spec?.volumes).toContainEqual({ name: 'operators', configMap: { name: 'ctrlmesh-ctrlmesh-hub-operators' } });
    const checksum = (o: typeof objects): string | undefined => o.find((x) => x.kind === 'Deployment')?.spec?.template?.metadata?.annotations?.['checksum/operators'];
    const changed = await renderedObjects({ chart: 'ctrlmesh-hub', namespace: 'ctrlmesh-system', values: withSecrets('ctrlmesh-hub'), set: ['operators.operator-demo/demo={eu-west-1}'] });
    expect(checksum(changed)).toMatch(/^[0-9a-f]{64}$/u);
    expect(checksum(changed)).not.toBe(checksum(objects));
    // Without the value: no file, no flag (any cluster may define any operator, as before).
    const plain = await renderedObjects({ chart: 'ctrlmesh-hub', namespace: 'ctrlmesh-system' });
    expect(plain.some((o) => o.kind === 'ConfigMap')).toBe(false);
    expect(plain.find((o) => o.kind === 'Deployment')?.spec?.template?.spec?.containers?.[0]?.args?.join(' ')).not.toContain('--operator-file');
  });

  it('the agent chart aggregates the kinds: a ShardingConfig is written by namespace admins only, unless rbac.shardingConfigWriters is edit', async () => {
    // The kinds are written in the member clusters, where only the agent chart is installed.
    const aggregation = async (set: string[] = []): Promise<Record<string, string[]>> => {
      const objects = await renderedObjects({ chart: 'ctrlmesh-agent', namespace: 'ctrlmesh-system', set });
      const writers: Record<string, string[]> = {};
      for (const role of objects.filter((o) => o.kind === 'ClusterRole')) {
        const labels = role.metadata.labels ?? {};
        const to = ['view', 'edit', 'admin'].filter((r) => labels[`rbac.authorization.k8s.io/aggregate-to-${r}`] === 'true');
        if (to.length === 0) continue; // the agent's own ClusterRole
        for (const rule of role.rules ?? []) {
          if (!rule.verbs?.includes('create')) continue;
          for (const resource of rule.resources ?? []) writers[resource] = [...(writers[resource] ?? []), ...to].sort();
        }
      }
      return writers;
    };
    expect(await aggregation()).toEqual({ shardingconfigs: ['admin'], circuitbreakers: ['admin', 'edit'], faultinjections: ['admin', 'edit'] });
    expect((await aggregation(['rbac.shardingConfigWriters=edit'])).shardingconfigs).toEqual(['admin', 'edit']);
    expect(await aggregation(['rbac.aggregateToDefaultRoles=false'])).toEqual({});
  });
  const policy = (objects: RenderedObject[]): RenderedObject['spec'] => objects.find((o) => o.kind === 'NetworkPolicy')?.spec;
  const monitoring = { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } };
  const proxies = { namespaceSelector: {}, podSelector: { matchLabels: { 'ctrlmesh.kusionstack.io/enable-proxy': 'true' } } };
  const tcp = (port: number): { protocol: string; port: number } => ({ protocol: 'TCP', port });

  it('each chart ships an ingress NetworkPolicy, on by default, admitting only the ports the mesh uses', async () => {
    const hub = await renderedObjects({ chart: 'ctrlmesh-hub', namespace: 'ctrlmesh-system' });
    expect(policy(hub)).toEqual({
      podSelector: { matchLabels: { 'app.kubernetes.io/name': 'ctrlmesh-hub', 'app.kubernetes.io/instance': 'ctrlmesh' } },
      policyTypes: ['Ingress'],
      ingress: [{ from: [monitoring], ports: [tcp(9464)] }],
    });
    // The agent's webhook from anywhere: the API server is not a pod, so no selector names it.
    const agent = await renderedObjects({ chart: 'ctrlmesh-agent', namespace: 'ctrlmesh-system' });
    expect(policy(agent)?.ingress).toEqual([{ ports: [tcp(9443)] }, { from: [monitoring], ports: [tcp(9465)] }]);
    const nats = await renderedObjects({ chart: 'ctrlmesh-nats', namespace: 'ctrlmesh-system' });
    expect(policy(nats)?.ingress).toEqual([
      { from: [{ podSelector: { matchExpressions: [{ key: 'app.kubernetes.io/name', operator: 'In', values: ['ctrlmesh-hub', 'ctrlmesh-agent'] }] } }, proxies], ports: [tcp(4222)] },
      { from: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'ctrlmesh-nats', 'app.kubernetes.io/instance': 'ctrlmesh' } } }], ports: [tcp(6222)] },
      { from: [monitoring], ports: [tcp(8222)] },
    ]);
    const widened = await renderedObjects({
      chart: 'ctrlmesh-nats',
      namespace: 'ctrlmesh-system',
      set: ['networkPolicy.client.namespaces={tools}', 'networkPolicy.client.extraFrom[0].ipBlock.cidr=203.0.113.0/24'],
    });
    expect((policy(widened)?.ingress?.[0] as { from: unknown[] }).from.slice(2)).toEqual([
      { namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: ['tools'] }] } },
      { ipBlock: { cidr: '203.0.113.0/24' } },
    ]);
    for (const chart of charts) {
      expect(policy(await renderedObjects({ chart, namespace: 'ctrlmesh-system', set: ['networkPolicy.enabled=false'] })), chart).toBeUndefined();
    }
  });

  it("NATS's Service leaves out the monitoring port unless service.exposeMonitor; the pod keeps it for its probes", async () => {
    const ports = async (set: string[]): Promise<string[]> =>
      (await renderedObjects({ chart: 'ctrlmesh-nats', namespace: 'ctrlmesh-system', set })).find((o) => o.kind === 'Service' && o.metadata.name === 'ctrlmesh-ctrlmesh-nats')?.spec?.ports?.map((p) => `${p.name}:${p.port}`) ?? [];
    expect(await ports([])).toEqual(['client:4222']);
    expect(await ports(['service.exposeMonitor=true'])).toEqual(['client:4222', 'monitor:8222']);
  });

  it("the hub's /status listens on the pod's loopback unless it has a token; then the Service and the policy expose it", async () => {
    const plain = await renderedObjects({ chart: 'ctrlmesh-hub', namespace: 'ctrlmesh-system' });
    expect(plain.find((o) => o.kind === 'Deployment')?.spec?.template?.spec?.containers?.[0]?.args).toEqual(
      expect.arrayContaining(['--listen=0.0.0.0:9464', '--status-listen=127.0.0.1:9465']),
    );
    expect(plain.find((o) => o.kind === 'Service')?.spec?.ports?.map((p) => p.port)).toEqual([9464]);
    const tokened = await renderedObjects({ chart: 'ctrlmesh-hub', namespace: 'ctrlmesh-system', set: ['status.token.existingSecret=hub-status'] });
    expect(tokened.find((o) => o.kind === 'Service')?.spec?.ports?.map((p) => p.port)).toEqual([9464, 9465]);
    expect(policy(tokened)?.ingress).toEqual([{ from: [monitoring], ports: [tcp(9464), tcp(9465)] }]);
    await expect(template({ chart: 'ctrlmesh-hub', namespace: 'ctrlmesh-system', set: ['status.port=9464'] })).rejects.toThrow(/status\.port must differ from port/);
  });

  it("the agent chart puts a policy in each operator namespace listed: the proxy's webhook and ops ports, and every port from the shards' own pods; the API server stores it", async () => {
    const namespaces = [uniqueName('op'), uniqueName('op')];
    for (const ns of namespaces) await run(kubectl, ['--kubeconfig', kubeconfig(), 'create', 'namespace', ns]);
    try {
      const rendered = await template({
        chart: 'ctrlmesh-agent',
        namespace: 'ctrlmesh-system',
        set: [`networkPolicy.operatorNamespaces={${namespaces.join(',')}}`, 'networkPolicy.operatorIngress[0].ports[0].port=8080'],
      });
      const policies = rendered.split(/^---$/mu).filter((doc) => /^kind: NetworkPolicy$/mu.test(doc) && /^ {2}namespace: /mu.test(doc));
      expect(policies).toHaveLength(2);
      await kubectlWithInput(['apply', '-f', '-'], policies.join('---\n'));
      for (const ns of namespaces) {
        const { stdout } = await run(kubectl, ['--kubeconfig', kubeconfig(), '--namespace', ns, 'get', 'networkpolicy', 'ctrlmesh-proxy', '-o', 'json']);
        expect((JSON.parse(stdout) as RenderedObject).spec).toEqual({
          podSelector: { matchLabels: { 'ctrlmesh.kusionstack.io/enable-proxy': 'true' } },
          policyTypes: ['Ingress'],
          ingress: [{ ports: [tcp(5445)] }, { from: [monitoring], ports: [tcp(5441)] }, { from: [{ podSelector: { matchLabels: { 'ctrlmesh.kusionstack.io/enable-proxy': 'true' } } }] }, { ports: [tcp(8080)] }],
        });
      }
    } finally {
      for (const ns of namespaces) await run(kubectl, ['--kubeconfig', kubeconfig(), 'delete', 'namespace', ns, '--wait=false']);
    }
  });
});
