import type { LabelSelector } from '../api/index.js';
import { matches } from '../sharding/index.js';
import { PROXY_WEBHOOK_PORT } from '../transport/proxy-command.js';

/** Pods carrying this label (value "true") get the proxy sidecar. */
export const ENABLE_PROXY_LABEL = 'ctrlmesh.kusionstack.io/enable-proxy';
/** Comma-separated names of the containers that are the operator (default: the pod's default container). */
export const OPERATOR_CONTAINERS_ANNOTATION = 'ctrlmesh.kusionstack.io/operator-containers';
/** Kubernetes' own hint for a pod's main container, honoured when the annotation above is absent. */
const DEFAULT_CONTAINER_ANNOTATION = 'kubectl.kubernetes.io/default-container';
/** Set on an injected pod: the ShardingConfig whose shard its proxy enforces. */
export const INJECTED_ANNOTATION = 'ctrlmesh.kusionstack.io/sharding-config';

export const PROXY_CONTAINER_NAME = 'ctrlmesh-proxy';
export const KUBECONFIG_VOLUME = 'ctrlmesh-kubeconfig';
export const KUBECONFIG_DIR = '/var/run/ctrlmesh';
/** Written by the proxy container at start; the operator reads it. */
export const KUBECONFIG_PATH = `${KUBECONFIG_DIR}/kubeconfig`;
/** The proxy's credentials (cluster kubeconfig, NATS identity and CA), from its shard's own Secret; the proxy's mount only. */
export const CREDENTIALS_VOLUME = 'ctrlmesh-proxy-credentials';
/** Secret files are mode 0400 (owner read); the kubelet makes them 0440 with the pod's fsGroup as their group. */
export const CREDENTIALS_MODE = 0o400;
/** The pod's own labels (a downwardAPI volume), mounted read-only in the proxy: which cluster rules select it. */
export const POD_INFO_VOLUME = 'ctrlmesh-pod-info';
export const POD_INFO_DIR = '/etc/ctrlmesh/pod-info';
/** The proxy's `--pod-labels`: kept up to date by the kubelet when the pod's labels change. */
export const POD_LABELS_PATH = `${POD_INFO_DIR}/labels`;
/**
 * The group the proxy reads its Secret files through: the image's unprivileged user's (uid and gid 1000). Set as
 * the pod's fsGroup when the pod has none; with one, the pod's own fsGroup serves the same purpose.
 */
export const PROXY_FS_GROUP = 1000;
/**
 * The prefix of the volume the ServiceAccount admission plugin adds (`kube-api-access-<random>`, a projected token,
 * the cluster's CA and the pod's namespace), mounted in every container before any mutating webhook runs.
 */
export const SERVICE_ACCOUNT_VOLUME_PREFIX = 'kube-api-access-';
/** A Secret's name is a DNS subdomain: lower-case labels joined by dots, at most 253 characters. */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/u;
const DNS_SUBDOMAIN_MAX = 253;

/** The parts of a container the mutation reads (a V1Container has more; they pass through untouched). */
export interface PodContainer {
  name: string;
  command?: string[];
  args?: string[];
  env?: { name: string; value?: string }[];
  volumeMounts?: { name: string; mountPath: string; subPath?: string }[];
  ports?: { name?: string; containerPort: number; protocol?: string }[];
}

/** The parts of a pod the mutation reads. */
export interface PodLike {
  metadata?: {
    name?: string;
    generateName?: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: { apiVersion: string; kind: string; name: string; controller?: boolean }[];
  };
  spec?: {
    containers?: PodContainer[];
    initContainers?: PodContainer[];
    volumes?: PodVolume[];
    securityContext?: { fsGroup?: number };
    automountServiceAccountToken?: boolean;
  };
}

/** The parts of a volume the mutation reads: its name, and whether it projects a ServiceAccount token. */
export interface PodVolume {
  name: string;
  projected?: { sources?: ({ serviceAccountToken?: { audience?: string; path: string } } & Record<string, unknown>)[] };
}

/** A ShardingConfig as far as selecting pods goes. */
export interface SelectingConfig {
  name: string;
  namespace: string;
  selector?: LabelSelector;
  /** `spec.webhook`: the proxy serves the operator's admission webhook and sends each review to the owning shard. */
  webhook?: { certDir: string; port: number };
}

/** Who the injected proxy serves: handed to the caller's argument builder. */
export interface ProxyTarget {
  namespace: string;
  shardingConfig: string;
  /** The pod's name; empty when the API server has not named it yet (generateName). */
  pod: string;
}

/** One key of a Secret, projected to a file of the volume. */
export interface SecretItem {
  key: string;
  path: string;
}

/** The Secret of the pod's namespace the proxy reads its credentials from, and which of its keys it gets. */
export interface ProxyCredentials {
  /** The shard's own Secret: it holds that shard's identity and nothing of another's. */
  secretName: (target: ProxyTarget) => string;
  /** The keys projected into the container, each to a fixed file name (a missing key keeps the pod from starting). */
  items: SecretItem[];
  /** Where the proxy container mounts them (read-only). */
  mountPath: string;
}

export interface SidecarOptions {
  image: string;
  /** Arguments of the proxy container (its image's entrypoint is `ctrlmesh`). */
  args: (target: ProxyTarget) => string[];
  /** Port of the proxy's /healthz and /readyz. */
  opsPort: number;
  credentials: ProxyCredentials;
}

export interface JsonPatchOperation {
  op: 'add' | 'replace';
  path: string;
  value: unknown;
}

export type InjectionDecision =
  | { kind: 'untouched'; reason: string }
  | { kind: 'patch'; shardingConfig: string; patch: JsonPatchOperation[] }
  | { kind: 'deny'; message: string };

/** RFC 6901: `~` and `/` inside a key are escaped in a JSON pointer. */
function pointerToken(key: string): string {
  return key.replaceAll('~', '~0').replaceAll('/', '~1');
}

function podName(pod: PodLike): string {
  return pod.metadata?.name || (pod.metadata?.generateName ? `${pod.metadata.generateName}*` : '(unnamed)');
}

/** The ShardingConfigs of the pod's namespace whose spec.selector matches its labels (a missing selector matches none). */
function selectingConfigs(pod: PodLike, namespace: string, configs: readonly SelectingConfig[]): SelectingConfig[] {
  const labels = pod.metadata?.labels ?? {};
  return configs.filter((c) => c.namespace === namespace && c.selector !== undefined && matches(c.selector, labels));
}

function operatorContainerNames(pod: PodLike): Set<string> {
  const annotations = pod.metadata?.annotations ?? {};
  const listed = annotations[OPERATOR_CONTAINERS_ANNOTATION];
  if (listed) return new Set(listed.split(',').map((n) => n.trim()).filter(Boolean));
  const first = annotations[DEFAULT_CONTAINER_ANNOTATION] ?? pod.spec?.containers?.[0]?.name;
  return new Set(first ? [first] : []);
}

/** What the proxy of a webhook operator gets: the operator's volume holding the certificates, and the port's name. */
interface WebhookSidecar {
  /** Mounted read-only at the same path as in the operator's container, so `certDir` is the same path. */
  mount: { name: string; mountPath: string; subPath?: string };
  /** The operator's containerPort named for `spec.webhook.port`, renamed away: its name goes to the proxy's port. */
  port?: { container: number; index: number; name: string };
}

/** The certificates' volume and the named port of a webhook operator's containers, or why the pod cannot serve it. */
function webhookSidecar(webhook: { certDir: string; port: number }, containers: readonly PodContainer[], operators: ReadonlySet<string>): WebhookSidecar | string {
  let mount: WebhookSidecar['mount'] | undefined;
  let port: WebhookSidecar['port'];
  const certDir = webhook.certDir.replace(/\/+$/, '');
  containers.forEach((c, container) => {
    if (!operators.has(c.name)) return;
    for (const m of c.volumeMounts ?? []) {
      const path = m.mountPath.replace(/\/+$/, '');
      const holds = certDir === path || certDir.startsWith(`${path}/`);
      if (holds && (!mount || path.length > mount.mountPath.replace(/\/+$/, '').length)) {
        mount = { name: m.name, mountPath: m.mountPath, ...(m.subPath ? { subPath: m.subPath } : {}) };
      }
    }
    (c.ports ?? []).forEach((p, index) => {
      if (!port && p.name && p.containerPort === webhook.port) port = { container, index, name: p.name };
    });
  });
  if (!mount) return `no volume of the operator's containers is mounted at spec.webhook.certDir ${webhook.certDir} (or above it): the proxy reads the webhook's certificate from that volume`;
  return { mount, ...(port ? { port } : {}) };
}

/** Why `name` cannot name a Secret, or undefined when it can. */
function secretNameProblem(name: string): string | undefined {
  if (name.length > DNS_SUBDOMAIN_MAX) return `it is ${name.length} characters long, more than the ${DNS_SUBDOMAIN_MAX} a Secret's name may have`;
  if (!DNS_SUBDOMAIN.test(name)) return "it is not a lower-case DNS subdomain, as a Secret's name must be";
  return undefined;
}

function projectsToken(volume: PodVolume): boolean {
  return (volume.projected?.sources ?? []).some((s) => s.serviceAccountToken !== undefined);
}

/**
 * Patch operations that leave the pod no ServiceAccount token, or a denial: the ServiceAccount admission plugin's
 * own volume keeps the CA and the namespace file (controller-runtime finds its leader-election namespace there;
 * test/node/mesh-on-node.test.ts, 'a controller-runtime operator at its defaults') and loses the token, and the pod
 * stops automounting one, so the plugin adds none when admission runs again. A token volume the pod's author wrote
 * is refused, not stripped: the pod asked for that token, and would start without it only to fail later.
 */
function tokenPatch(pod: PodLike, namespace: string, name: string): JsonPatchOperation[] | string {
  const spec = pod.spec ?? {};
  const patch: JsonPatchOperation[] = [];
  for (const [index, volume] of (spec.volumes ?? []).entries()) {
    if (!projectsToken(volume)) continue;
    if (!volume.name.startsWith(SERVICE_ACCOUNT_VOLUME_PREFIX)) {
      return (
        `pod ${namespace}/${name}: volume ${volume.name} projects a ServiceAccount token; the containers of a pod with the ` +
        `proxy reach the API server only through it, with its shard's credentials: remove the volume, or run the pod without ${ENABLE_PROXY_LABEL}`
      );
    }
    const sources = (volume.projected?.sources ?? []).filter((s) => s.serviceAccountToken === undefined);
    patch.push({ op: 'replace', path: `/spec/volumes/${index}`, value: { ...volume, projected: { ...volume.projected, sources } } });
  }
  if (spec.automountServiceAccountToken !== false) patch.push({ op: 'add', path: '/spec/automountServiceAccountToken', value: false });
  return patch;
}

function proxyContainer(target: ProxyTarget, options: SidecarOptions, webhook: WebhookSidecar | undefined): Record<string, unknown> {
  return {
    name: PROXY_CONTAINER_NAME,
    image: options.image,
    args: options.args(target),
    // A native sidecar (an init container that keeps running): it starts, and writes the kubeconfig, before the
    // operator's containers, and stops after them.
    restartPolicy: 'Always',
    env: [
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    ],
    volumeMounts: [
      { name: KUBECONFIG_VOLUME, mountPath: KUBECONFIG_DIR },
      { name: CREDENTIALS_VOLUME, mountPath: options.credentials.mountPath, readOnly: true },
      { name: POD_INFO_VOLUME, mountPath: POD_INFO_DIR, readOnly: true },
      ...(webhook ? [{ ...webhook.mount, readOnly: true }] : []),
    ],
    ...(webhook ? { ports: [{ containerPort: PROXY_WEBHOOK_PORT, protocol: 'TCP', ...(webhook.port ? { name: webhook.port.name } : {}) }] } : {}),
    startupProbe: { httpGet: { path: '/readyz', port: options.opsPort }, periodSeconds: 1, failureThreshold: 600 },
    livenessProbe: { httpGet: { path: '/healthz', port: options.opsPort } },
    securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } },
  };
}

/**
 * Every kubeconfig flag pointed at the generated file, in both of Go's spellings (`-kubeconfig` is `--kubeconfig`
 * to Go's flag package, and the last one wins); one appended if none.
 */
function withKubeconfigArg(args: readonly string[]): string[] {
  const out = [...args];
  let found = false;
  for (let i = 0; i < out.length; i += 1) {
    const flag = /^--?kubeconfig(=|$)/u.exec(out[i] ?? '');
    if (!flag) continue;
    found = true;
    if (flag[1] === '' && i + 1 < out.length) {
      out[i + 1] = KUBECONFIG_PATH;
      i += 1;
    } else {
      out[i] = `--kubeconfig=${KUBECONFIG_PATH}`;
    }
  }
  return found ? out : [...out, `--kubeconfig=${KUBECONFIG_PATH}`];
}

/** Patch operations pointing one operator container at the proxy; none when it already is. */
function operatorContainerPatch(container: PodContainer, index: number): JsonPatchOperation[] {
  const base = `/spec/containers/${index}`;
  const ops: JsonPatchOperation[] = [];
  const env = container.env ?? [];
  const entry = { name: 'KUBECONFIG', value: KUBECONFIG_PATH };
  if (!env.some((e) => e.name === 'KUBECONFIG')) {
    ops.push(container.env ? { op: 'add', path: `${base}/env/-`, value: entry } : { op: 'add', path: `${base}/env`, value: [entry] });
  }
  // Every entry, not only the first: with duplicates the last one wins.
  env.forEach((e, i) => {
    if (e.name === 'KUBECONFIG' && e.value !== KUBECONFIG_PATH) ops.push({ op: 'replace', path: `${base}/env/${i}`, value: entry });
  });
  const mounts = container.volumeMounts ?? [];
  if (!mounts.some((m) => m.name === KUBECONFIG_VOLUME)) {
    const mount = { name: KUBECONFIG_VOLUME, mountPath: KUBECONFIG_DIR, readOnly: true };
    ops.push(container.volumeMounts ? { op: 'add', path: `${base}/volumeMounts/-`, value: mount } : { op: 'add', path: `${base}/volumeMounts`, value: [mount] });
  }
  // Arguments are only touched when the pod spells out the command line: adding `args` to a container that has
  // neither would replace its image's CMD. Such a container still gets KUBECONFIG, which client libraries read.
  if (container.command || container.args) {
    const args = container.args ?? [];
    const next = withKubeconfigArg(args);
    if (next.join('\u0000') !== args.join('\u0000')) ops.push({ op: container.args ? 'replace' : 'add', path: `${base}/args`, value: next });
  }
  return ops;
}

/**
 * Decides what admission does with a pod (pure): a pod labelled enable-proxy=true that exactly one ShardingConfig
 * of its namespace selects gets the proxy as a native sidecar, an emptyDir where the proxy writes the operator's
 * kubeconfig, the proxy's credentials from its shard's Secret (the keys `options.credentials.items` names, mounted
 * read-only in the proxy alone; the pod's fsGroup set when it has none, so the proxy can read the 0400 files),
 * the pod's labels (a downwardAPI volume, read-only in the proxy: which cluster rules select it),
 * no ServiceAccount token in any container (see tokenPatch),
 * and, in the operator's containers only, that kubeconfig through KUBECONFIG and `--kubeconfig`. For a config with
 * `spec.webhook`, the proxy also mounts the operator's volume holding certDir and takes the webhook port's name on
 * its PROXY_WEBHOOK_PORT (a pod with no such volume is denied).
 * A labelled pod selected by none or by several is denied, naming them. Re-invocation adds nothing twice.
 */
export function injectSidecar(pod: PodLike, namespace: string, configs: readonly SelectingConfig[], options: SidecarOptions): InjectionDecision {
  const labels = pod.metadata?.labels ?? {};
  if (labels[ENABLE_PROXY_LABEL] !== 'true') return { kind: 'untouched', reason: `not labelled ${ENABLE_PROXY_LABEL}=true` };
  const name = podName(pod);
  const selecting = selectingConfigs(pod, namespace, configs);
  if (selecting.length === 0) {
    return {
      kind: 'deny',
      message:
        `pod ${namespace}/${name} is labelled ${ENABLE_PROXY_LABEL}=true but no ShardingConfig in namespace ${namespace} selects it: ` +
        `create one whose spec.selector matches the pod's labels, or remove the label`,
    };
  }
  if (selecting.length > 1) {
    const names = selecting.map((c) => c.name).sort();
    return {
      kind: 'deny',
      message:
        `pod ${namespace}/${name} is selected by ${names.length} ShardingConfigs in namespace ${namespace} (${names.join(', ')}); ` +
        `exactly one must select it: narrow their spec.selector`,
    };
  }
  const config = selecting[0] as SelectingConfig;
  const spec = pod.spec ?? {};
  const containers = spec.containers ?? [];
  const operators = operatorContainerNames(pod);
  if (operators.size === 0) {
    return { kind: 'deny', message: `pod ${namespace}/${name}: no operator container (annotation ${OPERATOR_CONTAINERS_ANNOTATION} names none, and the pod has no container)` };
  }
  const names = new Set(containers.map((c) => c.name));
  const unknown = [...operators].filter((n) => !names.has(n));
  if (unknown.length > 0) {
    return {
      kind: 'deny',
      message:
        `pod ${namespace}/${name}: annotation ${OPERATOR_CONTAINERS_ANNOTATION} names container(s) ${unknown.join(', ')} ` +
        `that the pod does not have (it has ${containers.map((c) => c.name).join(', ') || 'none'})`,
    };
  }

  const target: ProxyTarget = { namespace, shardingConfig: config.name, pod: pod.metadata?.name ?? '' };
  const patch: JsonPatchOperation[] = [];
  const initContainers = spec.initContainers ?? [];
  if (!initContainers.some((c) => c.name === PROXY_CONTAINER_NAME)) {
    const webhook = config.webhook ? webhookSidecar(config.webhook, containers, operators) : undefined;
    if (typeof webhook === 'string') return { kind: 'deny', message: `pod ${namespace}/${name}: ShardingConfig ${config.name} has spec.webhook, but ${webhook}` };
    const sidecar = proxyContainer(target, options, webhook);
    // First among the init containers, so an init container of the operator can already reach the API through it.
    patch.push(spec.initContainers ? { op: 'add', path: '/spec/initContainers/0', value: sidecar } : { op: 'add', path: '/spec/initContainers', value: [sidecar] });
    // The port's name moves to the proxy: a Service whose targetPort names it reaches the proxy, which routes.
    if (webhook?.port) {
      const { container, index } = webhook.port;
      const { name: _moved, ...unnamed } = containers[container]?.ports?.[index] ?? { containerPort: 0 };
      patch.push({ op: 'replace', path: `/spec/containers/${container}/ports/${index}`, value: unnamed });
    }
  }
  const tokens = tokenPatch(pod, namespace, name);
  if (typeof tokens === 'string') return { kind: 'deny', message: tokens };
  patch.push(...tokens);
  const volumes: Record<string, unknown>[] = [];
  if (!(spec.volumes ?? []).some((v) => v.name === KUBECONFIG_VOLUME)) volumes.push({ name: KUBECONFIG_VOLUME, emptyDir: {} });
  if (!(spec.volumes ?? []).some((v) => v.name === CREDENTIALS_VOLUME)) {
    const secretName = options.credentials.secretName(target);
    const problem = secretNameProblem(secretName);
    if (problem) {
      return {
        kind: 'deny',
        message:
          `pod ${namespace}/${name}: its proxy's Secret would be named ${secretName}, but ${problem}: ` +
          "shorten the agent's --proxy-secret (the chart's proxy.secretName), the cluster's or the ShardingConfig's name",
      };
    }
    volumes.push({ name: CREDENTIALS_VOLUME, secret: { secretName, items: options.credentials.items, defaultMode: CREDENTIALS_MODE } });
  }
  if (!(spec.volumes ?? []).some((v) => v.name === POD_INFO_VOLUME)) {
    volumes.push({ name: POD_INFO_VOLUME, downwardAPI: { items: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] } });
  }
  if (volumes.length) {
    if (spec.volumes) patch.push(...volumes.map((value): JsonPatchOperation => ({ op: 'add', path: '/spec/volumes/-', value })));
    else patch.push({ op: 'add', path: '/spec/volumes', value: volumes });
  }
  // A non-root proxy reads its 0400 Secret files through the pod's fsGroup (the kubelet gives them that group).
  if (spec.securityContext?.fsGroup === undefined) {
    patch.push(
      spec.securityContext
        ? { op: 'add', path: '/spec/securityContext/fsGroup', value: PROXY_FS_GROUP }
        : { op: 'add', path: '/spec/securityContext', value: { fsGroup: PROXY_FS_GROUP } },
    );
  }
  containers.forEach((c, i) => {
    if (operators.has(c.name)) patch.push(...operatorContainerPatch(c, i));
  });
  const annotations = pod.metadata?.annotations;
  if (annotations?.[INJECTED_ANNOTATION] !== config.name) {
    patch.push(
      annotations
        ? { op: 'add', path: `/metadata/annotations/${pointerToken(INJECTED_ANNOTATION)}`, value: config.name }
        : { op: 'add', path: '/metadata/annotations', value: { [INJECTED_ANNOTATION]: config.name } },
    );
  }
  if (patch.length === 0) return { kind: 'untouched', reason: 'already injected' };
  return { kind: 'patch', shardingConfig: config.name, patch };
}
