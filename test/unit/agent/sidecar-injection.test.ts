import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { KubeConfig } from '@kubernetes/client-node';
import { pino } from 'pino';
import { createHashSettings } from '../../../src/sharding/index.js';
import {
  CREDENTIALS_VOLUME,
  ENABLE_PROXY_LABEL,
  INJECTED_ANNOTATION,
  KUBECONFIG_PATH,
  KUBECONFIG_VOLUME,
  OPERATOR_CONTAINERS_ANNOTATION,
  POD_INFO_VOLUME,
  POD_LABELS_PATH,
  PROXY_CONTAINER_NAME,
  PROXY_FS_GROUP,
  injectSidecar,
  type JsonPatchOperation,
  type PodContainer,
  type PodLike,
  type PodVolume,
  type SelectingConfig,
  type SidecarOptions,
} from '../../../src/agent/sidecar-injection.js';
import { admitPod, proxySecretItems, proxySecretName, type InjectedProxy } from '../../../src/agent/sidecar-webhook.js';

const options: SidecarOptions = {
  image: 'controllermesh:test',
  args: (t) => ['proxy', `--sharding-config=${t.namespace}/${t.shardingConfig}`],
  opsPort: 5441,
  credentials: { secretName: (t) => `proxy-secret.${t.shardingConfig}`, mountPath: '/etc/creds', items: [{ key: 'nats.creds', path: 'nats.creds' }] },
};
const ns = 'operators';
const demo: SelectingConfig = { name: 'demo', namespace: ns, selector: { matchLabels: { app: 'demo' } } };

/** RFC 6902 add/replace on plain JSON, enough to see what the API server would make of a patch. */
function applyPatch<T>(doc: T, patch: readonly JsonPatchOperation[]): T {
  const out = structuredClone(doc) as unknown as Record<string, unknown>;
  for (const op of patch) {
    const tokens = op.path.split('/').slice(1).map((t) => t.replaceAll('~1', '/').replaceAll('~0', '~'));
    const last = tokens.pop() as string;
    let parent: unknown = out;
    for (const t of tokens) {
      parent = (parent as Record<string, unknown>)[t];
      if (parent === undefined) throw new Error(`${op.path}: ${t} does not exist`);
    }
    const value = structuredClone(op.value);
    if (Array.isArray(parent)) {
      if (last === '-') parent.push(value);
      else if (op.op === 'add') parent.splice(Number(last), 0, value);
      else parent[Number(last)] = value;
    } else {
      const record = parent as Record<string, unknown>;
      if (op.op === 'replace' && !(last in record)) throw new Error(`${op.path}: nothing to replace`);
      record[last] = value;
    }
  }
  return out as unknown as T;
}

function pod(containers: PodContainer[], extra: { labels?: Record<string, string>; annotations?: Record<string, string> } = {}): PodLike {
  return {
    metadata: {
      name: 'demo-0',
      namespace: ns,
      labels: { app: 'demo', [ENABLE_PROXY_LABEL]: 'true', ...extra.labels },
      ...(extra.annotations ? { annotations: extra.annotations } : {}),
    },
    spec: { containers },
  };
}

/** What the ServiceAccount admission plugin adds before any mutating webhook runs: a projected token, the CA, the namespace. */
const SA_MOUNT = { name: 'kube-api-access-x7k2p', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true };
const saVolume = (): PodVolume => ({
  name: SA_MOUNT.name,
  projected: {
    defaultMode: 420,
    sources: [
      { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
      { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
      { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
    ],
  },
} as PodVolume);
const projectsToken = (v: PodVolume): boolean => (v.projected?.sources ?? []).some((x) => x.serviceAccountToken !== undefined);

function injected(p: PodLike, configs: readonly SelectingConfig[] = [demo]): PodLike {
  const decision = injectSidecar(p, ns, configs, options);
  if (decision.kind !== 'patch') throw new Error(`expected a patch, got ${JSON.stringify(decision)}`);
  return applyPatch(p, decision.patch);
}

describe('injectSidecar', () => {
  it('leaves a pod without the label untouched', () => {
    const p = pod([{ name: 'manager' }], { labels: { [ENABLE_PROXY_LABEL]: 'false' } });
    expect(injectSidecar(p, ns, [demo], options)).toEqual({ kind: 'untouched', reason: `not labelled ${ENABLE_PROXY_LABEL}=true` });
  });

  it('adds the proxy as a native sidecar, the kubeconfig volume, and points the operator container at it', () => {
    const p = injected(pod([{ name: 'manager', command: ['/manager'], args: ['--leader-elect'] }, { name: 'istio-proxy', args: ['x'] }]));
    const [sidecar] = p.spec?.initContainers ?? [];
    expect(sidecar).toMatchObject({ name: PROXY_CONTAINER_NAME, image: 'controllermesh:test', restartPolicy: 'Always' });
    expect(sidecar?.args).toEqual(['proxy', '--sharding-config=operators/demo']);
    expect(sidecar?.volumeMounts).toEqual([
      { name: KUBECONFIG_VOLUME, mountPath: '/var/run/ctrlmesh' },
      { name: CREDENTIALS_VOLUME, mountPath: '/etc/creds', readOnly: true },
      // The pod's labels, for the cluster rules that select it: the proxy's alone, read-only.
      { name: POD_INFO_VOLUME, mountPath: '/etc/ctrlmesh/pod-info', readOnly: true },
    ]);
    expect(p.spec?.volumes).toEqual([
      { name: KUBECONFIG_VOLUME, emptyDir: {} },
      { name: CREDENTIALS_VOLUME, secret: { secretName: 'proxy-secret.demo', items: [{ key: 'nats.creds', path: 'nats.creds' }], defaultMode: 0o400 } },
      { name: POD_INFO_VOLUME, downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] } },
    ]);
    const [manager, other] = p.spec?.containers ?? [];
    expect(manager?.args).toEqual(['--leader-elect', `--kubeconfig=${KUBECONFIG_PATH}`]);
    expect(manager?.env).toEqual([{ name: 'KUBECONFIG', value: KUBECONFIG_PATH }]);
    // The operator gets the generated kubeconfig, never the proxy's credentials.
    expect(manager?.volumeMounts).toEqual([{ name: KUBECONFIG_VOLUME, mountPath: '/var/run/ctrlmesh', readOnly: true }]);
    expect(other).toEqual({ name: 'istio-proxy', args: ['x'] });
    expect(p.metadata?.annotations).toEqual({ [INJECTED_ANNOTATION]: 'demo' });
  });

  it("sets the pod's fsGroup when it has none, so the non-root proxy reads its 0400 Secret files, and keeps one it has", () => {
    expect(injected(pod([{ name: 'm' }])).spec?.securityContext).toEqual({ fsGroup: PROXY_FS_GROUP });
    const withContext = { ...pod([{ name: 'm' }]), spec: { containers: [{ name: 'm' }], securityContext: { runAsNonRoot: true } } } as PodLike;
    expect(injected(withContext).spec?.securityContext).toEqual({ runAsNonRoot: true, fsGroup: PROXY_FS_GROUP });
    const own = { ...pod([{ name: 'm' }]), spec: { containers: [{ name: 'm' }], securityContext: { fsGroup: 65532 } } };
    expect(injected(own).spec?.securityContext).toEqual({ fsGroup: 65532 });
  });

  it('replaces an existing --kubeconfig value in either form, and an existing KUBECONFIG', () => {
    const spaced = injected(pod([{ name: 'm', args: ['--kubeconfig', '/etc/k', '-v=2'], env: [{ name: 'KUBECONFIG', value: '/etc/k' }] }]));
    expect(spaced.spec?.containers?.[0]?.args).toEqual(['--kubeconfig', KUBECONFIG_PATH, '-v=2']);
    expect(spaced.spec?.containers?.[0]?.env).toEqual([{ name: 'KUBECONFIG', value: KUBECONFIG_PATH }]);
    const joined = injected(pod([{ name: 'm', args: ['--kubeconfig=/etc/k'] }]));
    expect(joined.spec?.containers?.[0]?.args).toEqual([`--kubeconfig=${KUBECONFIG_PATH}`]);
    // Go's flag package reads -kubeconfig as --kubeconfig, and the last one wins: left as it was, it would keep the
    // operator off the proxy.
    const dashed = injected(pod([{ name: 'm', args: ['--kubeconfig=/a', '-kubeconfig=/admin/kubeconfig', '-kubeconfig', '/b'] }]));
    expect(dashed.spec?.containers?.[0]?.args).toEqual([`--kubeconfig=${KUBECONFIG_PATH}`, `--kubeconfig=${KUBECONFIG_PATH}`, '-kubeconfig', KUBECONFIG_PATH]);
  });

  it('refuses a pod whose annotation names no operator container', () => {
    const decision = injectSidecar(pod([{ name: 'm' }], { annotations: { [OPERATOR_CONTAINERS_ANNOTATION]: ' , ' } }), ns, [demo], options);
    expect(decision.kind === 'deny' && decision.message).toContain('no operator container');
  });

  it('does not add args to a container that relies on its image command (they would replace its CMD)', () => {
    const p = injected(pod([{ name: 'manager' }]));
    expect(p.spec?.containers?.[0]?.args).toBeUndefined();
    expect(p.spec?.containers?.[0]?.env).toEqual([{ name: 'KUBECONFIG', value: KUBECONFIG_PATH }]);
  });

  it('chooses the operator containers by annotation, then by kubectl default-container, then the first', () => {
    const listed = injected(pod([{ name: 'a', args: [] }, { name: 'b', args: [] }, { name: 'c', args: [] }], { annotations: { [OPERATOR_CONTAINERS_ANNOTATION]: 'a, c' } }));
    expect(listed.spec?.containers?.map((c) => c.args)).toEqual([[`--kubeconfig=${KUBECONFIG_PATH}`], [], [`--kubeconfig=${KUBECONFIG_PATH}`]]);
    const hinted = injected(pod([{ name: 'a', args: [] }, { name: 'b', args: [] }], { annotations: { 'kubectl.kubernetes.io/default-container': 'b' } }));
    expect(hinted.spec?.containers?.map((c) => c.args)).toEqual([[], [`--kubeconfig=${KUBECONFIG_PATH}`]]);
  });

  it('refuses a pod that no ShardingConfig of its namespace selects, saying so', () => {
    const elsewhere = { ...demo, namespace: 'other' };
    const decision = injectSidecar(pod([{ name: 'm' }]), ns, [elsewhere, { name: 'x', namespace: ns, selector: { matchLabels: { app: 'x' } } }], options);
    expect(decision).toEqual({
      kind: 'deny',
      message: expect.stringMatching(/^pod operators\/demo-0 is labelled ctrlmesh\.kusionstack\.io\/enable-proxy=true but no ShardingConfig in namespace operators selects it/),
    });
  });

  it('refuses a pod that several ShardingConfigs select, naming them', () => {
    const second: SelectingConfig = { name: 'demo-too', namespace: ns, selector: { matchExpressions: [{ key: 'app', operator: 'Exists' }] } };
    const decision = injectSidecar(pod([{ name: 'm' }]), ns, [second, demo], options);
    expect(decision).toEqual({
      kind: 'deny',
      message: 'pod operators/demo-0 is selected by 2 ShardingConfigs in namespace operators (demo, demo-too); exactly one must select it: narrow their spec.selector',
    });
  });

  it('refuses an annotation naming a container the pod does not have', () => {
    const decision = injectSidecar(pod([{ name: 'm' }], { annotations: { [OPERATOR_CONTAINERS_ANNOTATION]: 'manager' } }), ns, [demo], options);
    expect(decision.kind).toBe('deny');
    expect(decision.kind === 'deny' && decision.message).toContain('names container(s) manager that the pod does not have (it has m)');
  });

  it('leaves no container a ServiceAccount token: the admission plugin\'s volume keeps the CA and namespace, and the pod stops automounting', () => {
    const mounted = (name: string): PodContainer => ({ name, volumeMounts: [{ ...SA_MOUNT }] });
    const p: PodLike = { ...pod([mounted('manager'), mounted('log-shipper')]), spec: { containers: [mounted('manager'), mounted('log-shipper')], initContainers: [mounted('init-db')], volumes: [saVolume()] } };
    const once = injected(p);
    expect(once.spec?.automountServiceAccountToken).toBe(false);
    const volume = once.spec?.volumes?.find((v) => v.name === SA_MOUNT.name);
    expect(volume).toEqual({ ...saVolume(), projected: { defaultMode: 420, sources: saVolume().projected?.sources?.slice(1) } });
    // Every container keeps its mount (controller-runtime reads the namespace file there), with no token in it.
    for (const c of [...(once.spec?.containers ?? []), ...(once.spec?.initContainers ?? []).filter((x) => x.name !== PROXY_CONTAINER_NAME)]) {
      expect(c.volumeMounts, c.name).toContainEqual(SA_MOUNT);
    }
    expect(once.spec?.initContainers?.[0]?.volumeMounts?.some((m) => m.name === SA_MOUNT.name)).toBe(false);
    expect(once.spec?.volumes?.some(projectsToken)).toBe(false);
    expect(injectSidecar(once, ns, [demo], options)).toEqual({ kind: 'untouched', reason: 'already injected' });
  });

  it('refuses a pod whose author projects a ServiceAccount token, rather than start it without the token it asked for', () => {
    const own: PodVolume = { name: 'vault-token', projected: { sources: [{ serviceAccountToken: { audience: 'vault', path: 'token' } }] } };
    const p: PodLike = { ...pod([{ name: 'm' }]), spec: { containers: [{ name: 'm', volumeMounts: [{ name: 'vault-token', mountPath: '/var/run/vault' }] }], volumes: [saVolume(), own] } };
    const decision = injectSidecar(p, ns, [demo], options);
    expect(decision).toEqual({ kind: 'deny', message: expect.stringContaining('pod operators/demo-0: volume vault-token projects a ServiceAccount token') });
  });

  it("refuses a pod whose shard's Secret name would not be a Secret name", () => {
    const long: SidecarOptions = { ...options, credentials: { ...options.credentials, secretName: (t) => `${'p'.repeat(250)}.${t.shardingConfig}` } };
    const decision = injectSidecar(pod([{ name: 'm' }]), ns, [demo], long);
    expect(decision.kind === 'deny' && decision.message).toMatch(/its proxy's Secret would be named p+\.demo, but it is 255 characters long/);
    const upper: SidecarOptions = { ...options, credentials: { ...options.credentials, secretName: () => 'Proxy.demo' } };
    expect(injectSidecar(pod([{ name: 'm' }]), ns, [demo], upper)).toMatchObject({ kind: 'deny', message: expect.stringContaining('not a lower-case DNS subdomain') });
  });

  const containerArb = fc.record(
    {
      name: fc.constantFrom('manager', 'sidecar', 'logger', 'helper'),
      command: fc.array(fc.constantFrom('/bin/op', 'run'), { maxLength: 2 }),
      args: fc.array(fc.constantFrom('--kubeconfig', '--kubeconfig=/x', '/y', '-v=1', '--leader-elect'), { maxLength: 4 }),
      env: fc.array(fc.record({ name: fc.constantFrom('A', 'KUBECONFIG', 'B'), value: fc.constantFrom('1', '/k') }), { maxLength: 3 }),
      volumeMounts: fc.array(fc.record({ name: fc.constantFrom('data', 'certs'), mountPath: fc.constantFrom('/data', '/certs') }), { maxLength: 2 }),
    },
    { requiredKeys: ['name'] },
  );
  const podArb = fc
    .record({
      containers: fc.uniqueArray(containerArb, { minLength: 1, maxLength: 4, selector: (c) => c.name }),
      initContainers: fc.option(fc.constant<PodContainer[]>([{ name: 'init-db' }]), { nil: undefined }),
      volumes: fc.option(fc.constantFrom<PodVolume[]>([{ name: 'data' }], [{ name: 'data' }, saVolume()], [saVolume()]), { nil: undefined }),
      annotations: fc.option(fc.constant({ team: 'a' }), { nil: undefined }),
    })
    .map(({ containers, initContainers, volumes, annotations }): PodLike => ({
      metadata: { name: 'p-0', labels: { app: 'demo', [ENABLE_PROXY_LABEL]: 'true' }, ...(annotations ? { annotations } : {}) },
      spec: { containers, ...(initContainers ? { initContainers } : {}), ...(volumes ? { volumes } : {}) },
    }));

  it('is idempotent and leaves every container but the operator one as it was (property)', () => {
    fc.assert(
      fc.property(podArb, (p) => {
        const once = injected(p);
        expect(injectSidecar(once, ns, [demo], options)).toEqual({ kind: 'untouched', reason: 'already injected' });
        const operator = p.spec?.containers?.[0]?.name;
        p.spec?.containers?.forEach((c, i) => {
          const after = once.spec?.containers?.[i];
          if (c.name !== operator) expect(after).toEqual(c);
          else expect(after?.env?.filter((e) => e.name === 'KUBECONFIG').every((e) => e.value === KUBECONFIG_PATH)).toBe(true);
        });
        expect(once.spec?.initContainers?.filter((c) => c.name === PROXY_CONTAINER_NAME)).toHaveLength(1);
        expect(once.spec?.volumes?.filter((v) => v.name === KUBECONFIG_VOLUME)).toHaveLength(1);
        expect(once.spec?.volumes?.filter((v) => v.name === CREDENTIALS_VOLUME)).toHaveLength(1);
        expect(once.spec?.containers?.some((c) => c.volumeMounts?.some((m) => m.name === CREDENTIALS_VOLUME))).toBe(false);
        expect(once.spec?.volumes?.some(projectsToken)).toBe(false);
        expect(once.spec?.automountServiceAccountToken).toBe(false);
      }),
    );
  });
});

describe('the injected proxy of an agent', () => {
  const SIGNER = `N${'A'.repeat(55)}`;
  const proxy = (natsTls: boolean): InjectedProxy => ({
    image: 'controllermesh:test',
    nats: ['tls://nats-0:4222', 'tls://nats-1:4222'],
    natsTls,
    routeSigners: [SIGNER],
    secretName: 'ctrlmesh-proxy',
    cluster: 'eu-west-1',
    settings: createHashSettings({ algorithm: 'fnv' }),
  });
  /** A KubeConfig whose only API is the ShardingConfig list injection reads. */
  const kcListing = (items: unknown[]): KubeConfig => ({ makeApiClient: () => ({ listNamespacedCustomObject: () => Promise.resolve({ items }) }) }) as unknown as KubeConfig;
  const config = { apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1', kind: 'ShardingConfig', metadata: { name: 'demo', namespace: ns }, spec: { selector: { matchLabels: { app: 'demo' } } } };

  async function admitted(natsTls: boolean): Promise<PodLike> {
    const p = pod([{ name: 'manager' }]);
    const response = await admitPod({ uid: 'u1', namespace: ns, object: p }, { kc: kcListing([config]), proxy: proxy(natsTls), logger: pino({ level: 'silent' }) });
    expect(response.allowed).toBe(true);
    return applyPatch(p, JSON.parse(Buffer.from(response.patch ?? '', 'base64').toString()) as JsonPatchOperation[]);
  }

  it('names each shard its own Secret, <secretName>.<cluster>.<shard>, holding only that shard\'s keys', () => {
    expect(proxySecretName('ctrlmesh-proxy', 'eu-west-1/demo-2-normal')).toBe('ctrlmesh-proxy.eu-west-1.demo-2-normal');
    expect(proxySecretItems(false).map((i) => i.key)).toEqual(['kubeconfig', 'nats.creds']);
  });

  it("gets its shard's NATS identity, the NATS CA, the route signers and its kubeconfig from the mounted Secret", async () => {
    const p = await admitted(true);
    const sidecar = p.spec?.initContainers?.[0];
    expect(sidecar?.args).toEqual([
      'proxy',
      '--nats=tls://nats-0:4222',
      '--nats=tls://nats-1:4222',
      '--nats-ca=/etc/ctrlmesh/credentials/nats-ca.crt',
      '--nats-creds=/etc/ctrlmesh/credentials/nats.creds',
      `--route-signer=${SIGNER}`,
      `--operator=${ns}/demo`,
      '--shard=eu-west-1/demo',
      '--listen=127.0.0.1:5443',
      '--ops-listen=0.0.0.0:5441',
      '--store=/var/run/ctrlmesh/route-table.json',
      '--write-kubeconfig=/var/run/ctrlmesh/kubeconfig',
      '--credentials=/etc/ctrlmesh/credentials/kubeconfig',
      // The proxy keeps the shard away from the proxy Secrets of its namespace, its own among them.
      '--mesh-secret=ctrlmesh-proxy',
      `--pod-labels=${POD_LABELS_PATH}`,
    ]);
    expect(sidecar?.volumeMounts).toContainEqual({ name: CREDENTIALS_VOLUME, mountPath: '/etc/ctrlmesh/credentials', readOnly: true });
    expect(p.spec?.volumes?.find((v) => v.name === CREDENTIALS_VOLUME)).toEqual({
      name: CREDENTIALS_VOLUME,
      secret: {
        // The shard's own Secret: no other shard's identity is in the pod.
        secretName: 'ctrlmesh-proxy.eu-west-1.demo',
        items: [
          { key: 'kubeconfig', path: 'kubeconfig' },
          { key: 'nats-ca.crt', path: 'nats-ca.crt' },
          { key: 'nats.creds', path: 'nats.creds' },
        ],
        defaultMode: 0o400,
      },
    });
  });

  it('gets no CA when the agent reaches NATS without TLS', async () => {
    const p = await admitted(false);
    expect(p.spec?.initContainers?.[0]?.args?.some((a) => a.startsWith('--nats-ca'))).toBe(false);
    const volume = p.spec?.volumes?.find((v) => v.name === CREDENTIALS_VOLUME) as { secret?: { items?: { key: string }[] } } | undefined;
    expect(volume?.secret?.items?.map((i) => i.key)).toEqual(['kubeconfig', 'nats.creds']);
  });

  it("runs the child of an auto-sharding root that the pod's StatefulSet ordinal runs, and refuses any other pod", async () => {
    const root = {
      ...config,
      metadata: { name: 'demo-root', namespace: ns },
      spec: {
        root: { prefix: 'demo', targetStatefulSet: 'demo', auto: { shardingSize: 2, everyShardReplicas: 1 }, resourceSelector: [{ apiGroups: [''], resources: ['configmaps'] }] },
        selector: { matchLabels: { app: 'demo' } },
      },
    };
    const injector = { kc: kcListing([root]), proxy: proxy(false), logger: pino({ level: 'silent' }) };
    const ordinal1 = pod([{ name: 'manager' }]);
    const controller = { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'demo', controller: true };
    ordinal1.metadata = { ...ordinal1.metadata, name: 'demo-1', ownerReferences: [controller] };
    const response = await admitPod({ uid: 'u1', namespace: ns, object: ordinal1 }, injector);
    const patched = applyPatch(ordinal1, JSON.parse(Buffer.from(response.patch ?? '', 'base64').toString()) as JsonPatchOperation[]);
    expect(patched.spec?.initContainers?.[0]?.args).toContain('--shard=eu-west-1/demo-2-normal');
    expect(patched.spec?.volumes?.find((v) => v.name === CREDENTIALS_VOLUME)).toMatchObject({ secret: { secretName: 'ctrlmesh-proxy.eu-west-1.demo-2-normal' } });
    const stray = await admitPod({ uid: 'u2', namespace: ns, object: { ...ordinal1, metadata: { ...ordinal1.metadata, name: 'stray' } } }, injector);
    expect(stray.allowed).toBe(false);
    expect(stray.status?.message).toContain('is selected by the auto-sharding root demo-root');
    // Named like an ordinal pod, but controlled by no StatefulSet of that name, or not as its controller.
    for (const ownerReferences of [[], [{ ...controller, name: 'other' }], [{ ...controller, controller: false }], [{ ...controller, apiVersion: 'example.com/v1' }]]) {
      const bare = await admitPod({ uid: 'u3', namespace: ns, object: { ...ordinal1, metadata: { ...ordinal1.metadata, ownerReferences } } }, injector);
      expect(bare.allowed).toBe(false);
    }
  });
});

describe('the proxy of a webhook operator (spec.webhook)', () => {
  const certDir = '/tmp/k8s-webhook-server/serving-certs';
  const hooked: SelectingConfig = { ...demo, webhook: { certDir, port: 9443 } };
  const manager = (extra: Partial<PodContainer> = {}): PodContainer => ({
    name: 'manager',
    volumeMounts: [
      { name: 'tmp', mountPath: '/tmp' },
      { name: 'cert', mountPath: `${certDir}/` },
    ],
    ports: [
      { name: 'webhook-server', containerPort: 9443, protocol: 'TCP' },
      { name: 'metrics', containerPort: 8080 },
    ],
    ...extra,
  });

  it("mounts the operator's volume holding certDir read-only, and moves the webhook port's name to the proxy's 5445", () => {
    const p = injected(pod([manager()]), [hooked]);
    const sidecar = p.spec?.initContainers?.[0] as PodContainer;
    expect(sidecar.volumeMounts).toContainEqual({ name: 'cert', mountPath: `${certDir}/`, readOnly: true });
    expect(sidecar.volumeMounts?.some((m) => m.name === 'tmp')).toBe(false);
    expect(sidecar.ports).toEqual([{ containerPort: 5445, protocol: 'TCP', name: 'webhook-server' }]);
    expect(p.spec?.containers?.[0]?.ports).toEqual([{ containerPort: 9443, protocol: 'TCP' }, { name: 'metrics', containerPort: 8080 }]);
    expect(injectSidecar(p, ns, [hooked], options)).toEqual({ kind: 'untouched', reason: 'already injected' });
  });

  it('takes the mount nearest above certDir (subPath kept), and a port without a name stays as it is', () => {
    const p = injected(pod([manager({ volumeMounts: [{ name: 'tmp', mountPath: '/tmp', subPath: 'x' }], ports: [{ containerPort: 9443 }] })]), [hooked]);
    const sidecar = p.spec?.initContainers?.[0] as PodContainer;
    expect(sidecar.volumeMounts).toContainEqual({ name: 'tmp', mountPath: '/tmp', subPath: 'x', readOnly: true });
    expect(sidecar.ports).toEqual([{ containerPort: 5445, protocol: 'TCP' }]);
    expect(p.spec?.containers?.[0]?.ports).toEqual([{ containerPort: 9443 }]);
  });

  it('refuses a pod whose operator containers mount nothing at certDir: the proxy could not read the certificate', () => {
    const decision = injectSidecar(pod([manager({ volumeMounts: [{ name: 'cert', mountPath: '/var/certs' }] })]), ns, [hooked], options);
    expect(decision.kind).toBe('deny');
    expect(decision.kind === 'deny' && decision.message).toContain(`ShardingConfig demo has spec.webhook, but no volume of the operator's containers is mounted at spec.webhook.certDir ${certDir}`);
  });

  it('a pod of a config without spec.webhook gets no port and no extra mount', () => {
    const sidecar = injected(pod([manager()])).spec?.initContainers?.[0] as PodContainer;
    expect(sidecar.ports).toBeUndefined();
    expect(sidecar.volumeMounts?.some((m) => m.name === 'cert')).toBe(false);
  });

  it('the agent passes the webhook flags to the proxy of a config with spec.webhook', async () => {
    const config = {
      apiVersion: 'ctrlmesh.kusionstack.io/v1alpha1',
      kind: 'ShardingConfig',
      metadata: { name: 'demo', namespace: ns },
      spec: { selector: { matchLabels: { app: 'demo' } }, webhook: { certDir, port: 9443 } },
    };
    const kc = { makeApiClient: () => ({ listNamespacedCustomObject: () => Promise.resolve({ items: [config] }) }) } as unknown as KubeConfig;
    const proxy: InjectedProxy = { image: 'i', nats: ['nats://n:4222'], natsTls: false, routeSigners: [`N${'A'.repeat(55)}`], secretName: 's', cluster: 'c', settings: createHashSettings() };
    const p = pod([manager()]);
    const response = await admitPod({ uid: 'u1', namespace: ns, object: p }, { kc, proxy, logger: pino({ level: 'silent' }) });
    const patched = applyPatch(p, JSON.parse(Buffer.from(response.patch ?? '', 'base64').toString()) as JsonPatchOperation[]);
    expect(patched.spec?.initContainers?.[0]?.args).toEqual(expect.arrayContaining(['--webhook-listen=0.0.0.0:5445', '--webhook-port=9443', `--webhook-cert-dir=${certDir}`]));
  });
});
