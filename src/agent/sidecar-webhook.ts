import {
  CustomObjectsApi,
  type AdmissionregistrationV1WebhookClientConfig,
  type KubeConfig,
  type KubernetesObject,
  type V1MutatingWebhook,
} from '@kubernetes/client-node';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { API_GROUP, API_VERSION, type LabelSelector } from '../api/index.js';
import { shardName, shardOfPod, shardsOfConfig, type HashSettings } from '../sharding/index.js';
import { PROXY_API_PORT, PROXY_OPS_PORT, PROXY_WEBHOOK_PORT, proxyCommandArgs, type ProxyCommandOptions } from '../transport/proxy-command.js';
import { ShardingConfigValidator } from './sharding-configs.js';
import {
  ENABLE_PROXY_LABEL,
  KUBECONFIG_DIR,
  KUBECONFIG_PATH,
  POD_LABELS_PATH,
  injectSidecar,
  type PodLike,
  type ProxyTarget,
  type SecretItem,
  type SelectingConfig,
  type SidecarOptions,
} from './sidecar-injection.js';

/** Where the agent's webhook server answers pod admission for sidecar injection. */
export const INJECT_PATH = '/inject-proxy';

/** The proxy the agent injects: its image, and what it needs to follow its shard's route table. */
export interface InjectedProxy {
  image: string;
  /** The hub's NATS, as the agent reaches it. */
  nats: readonly string[];
  /** Whether the agent reaches NATS over TLS: the proxy then verifies the server with the Secret's `nats-ca.crt`. */
  natsTls: boolean;
  /** Public keys (N...) of the hub's route-table signing key: the proxy applies only tables they signed. */
  routeSigners: readonly string[];
  /** The name the proxy Secrets of the pod's namespace start with: shard S's is proxySecretName(secretName, S). */
  secretName: string;
  /** This cluster's name in the registry: shards are named `<cluster>/<config>`. */
  cluster: string;
  /** The agent's hash settings, to expand an auto-sharding root into its children. */
  settings: HashSettings;
}

export interface SidecarInjector {
  /** The agent's admin kubeconfig: ShardingConfigs are read from the API server at each admission, never stale. */
  kc: KubeConfig;
  proxy: InjectedProxy;
  logger: Logger;
  /** The agent's validator, shared with its informer, so a version it has seen is not validated again (default: one of its own). */
  validator?: ShardingConfigValidator;
}

interface PodAdmissionRequest {
  uid: string;
  namespace?: string;
  object?: PodLike;
}

/** The part of an admission.k8s.io/v1 AdmissionResponse injection produces. */
export interface InjectionResponse {
  uid: string;
  allowed: boolean;
  patchType?: 'JSONPatch';
  patch?: string;
  status?: { code: number; message: string };
}

interface ListedConfig extends SelectingConfig {
  /** The shard (`<cluster>/<config>`) the pod runs for this valid config: a root's child by the pod's ordinal, if any. */
  shard?: string;
  root: boolean;
}

/**
 * Whether a StatefulSet named `name` controls the pod (its controller owner reference), as for every pod its
 * controller creates. A pod that is only named like one of them gets no shard, or a bare pod named `sample-0` would
 * run as the shard of ordinal 0 (pinned by test/integration/injection.test.ts, 'gives a pod of an auto-sharding root
 * the shard its StatefulSet ordinal runs, and refuses any other pod').
 */
function controlledBy(pod: PodLike, name: string): boolean {
  return (pod.metadata?.ownerReferences ?? []).some((o) => o.controller === true && o.kind === 'StatefulSet' && o.apiVersion.startsWith('apps/') && o.name === name);
}

async function listConfigs(injector: SidecarInjector, namespace: string, pod: PodLike): Promise<ListedConfig[]> {
  const list = (await injector.kc.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({
    group: API_GROUP,
    version: API_VERSION.slice(API_GROUP.length + 1),
    namespace,
    plural: 'shardingconfigs',
  })) as { items?: (KubernetesObject & { spec?: { selector?: LabelSelector; root?: unknown } })[] };
  const { cluster, settings } = injector.proxy;
  const validator = injector.validator ?? new ShardingConfigValidator(settings.bucketCount);
  return (list.items ?? []).map((item) => {
    // Pods are selected as the config is written, valid or not; only a valid one says which shard a pod runs.
    const config: ListedConfig = {
      name: item.metadata?.name ?? '',
      namespace,
      root: item.spec?.root !== undefined,
      ...(item.spec?.selector ? { selector: item.spec.selector } : {}),
    };
    const { model } = validator.validate(item);
    const meaning = model ? shardsOfConfig(model, { homeCluster: cluster, settings }) : undefined;
    const owned = meaning?.targetStatefulSet === undefined || controlledBy(pod, meaning.targetStatefulSet);
    const shard = meaning && owned ? shardOfPod(meaning, pod.metadata?.name ?? '') : undefined;
    if (shard) config.shard = shard.name;
    if (meaning?.webhook) config.webhook = meaning.webhook;
    return config;
  });
}

/**
 * The Secret of shard `<cluster>/<name>`'s proxy: `<secretName>.<cluster>.<name>`, in the pod's namespace. Each
 * shard's identity has a Secret of its own, so a pod mounts no other shard's.
 */
export function proxySecretName(secretName: string, shard: string): string {
  return `${secretName}.${shard.replace('/', '.')}`;
}

/** The keys of a shard's proxy Secret and their files: the cluster kubeconfig, the NATS CA when NATS is TLS, the shard's creds. */
export function proxySecretItems(natsTls: boolean): SecretItem[] {
  return [
    { key: PROXY_SECRET_KEYS.kubeconfig, path: 'kubeconfig' },
    ...(natsTls ? [{ key: PROXY_SECRET_KEYS.natsCa, path: 'nats-ca.crt' }] : []),
    { key: PROXY_SECRET_KEYS.natsCreds, path: 'nats.creds' },
  ];
}

/**
 * `ctrlmesh proxy` following `<cluster>/<shard>` of operator `<namespace>/<config>` in the hub's NATS KV; for a
 * config with `spec.webhook`, serving the operator's webhook on PROXY_WEBHOOK_PORT with its certificate.
 */
function sidecarOptions(proxy: InjectedProxy, configs: readonly ListedConfig[]): SidecarOptions {
  const configOf = (target: ProxyTarget): ListedConfig | undefined => configs.find((c) => c.name === target.shardingConfig);
  const shard = (target: ProxyTarget): string => configOf(target)?.shard ?? shardName(proxy.cluster, target.shardingConfig);
  const webhook = (target: ProxyTarget): Partial<ProxyCommandOptions> => {
    const spec = configOf(target)?.webhook;
    return spec ? { webhookListen: `0.0.0.0:${PROXY_WEBHOOK_PORT}`, webhookPort: spec.port, webhookCertDir: spec.certDir } : {};
  };
  return {
    image: proxy.image,
    opsPort: PROXY_OPS_PORT,
    credentials: { secretName: (target) => proxySecretName(proxy.secretName, shard(target)), mountPath: PROXY_CREDENTIALS_DIR, items: proxySecretItems(proxy.natsTls) },
    args: (target) =>
      proxyCommandArgs({
        nats: proxy.nats,
        ...(proxy.natsTls ? { natsCa: `${PROXY_CREDENTIALS_DIR}/nats-ca.crt` } : {}),
        natsCreds: `${PROXY_CREDENTIALS_DIR}/nats.creds`,
        routeSigners: proxy.routeSigners,
        operator: `${target.namespace}/${target.shardingConfig}`,
        shard: shard(target),
        listen: `127.0.0.1:${PROXY_API_PORT}`,
        opsListen: `0.0.0.0:${PROXY_OPS_PORT}`,
        store: `${KUBECONFIG_DIR}/route-table.json`,
        writeKubeconfig: KUBECONFIG_PATH,
        credentials: `${PROXY_CREDENTIALS_DIR}/kubeconfig`,
        // The proxy keeps every shard away from these Secrets, its own included.
        meshSecret: proxy.secretName,
        podLabels: POD_LABELS_PATH,
        ...webhook(target),
      }),
  };
}

/** Answers one pod admission request: the sidecar patch, a denial naming the ShardingConfigs, or nothing. */
export async function admitPod(request: PodAdmissionRequest, injector: SidecarInjector): Promise<InjectionResponse> {
  const pod = request.object ?? {};
  const namespace = request.namespace ?? pod.metadata?.namespace ?? 'default';
  const refuse = (message: string): InjectionResponse => ({ uid: request.uid, allowed: false, status: { code: 403, message } });
  if (pod.metadata?.labels?.[ENABLE_PROXY_LABEL] !== 'true') return { uid: request.uid, allowed: true };
  let configs: ListedConfig[];
  try {
    configs = await listConfigs(injector, namespace, pod);
  } catch (err) {
    injector.logger.error({ err, namespace }, 'cannot list ShardingConfigs for sidecar injection');
    return refuse(`ctrlmesh agent cannot read the ShardingConfigs of namespace ${namespace} to inject the proxy: ${(err as Error).message}; retry`);
  }
  const decision = injectSidecar(pod, namespace, configs, sidecarOptions(injector.proxy, configs));
  if (decision.kind === 'deny') {
    injector.logger.info({ namespace, pod: pod.metadata?.name ?? pod.metadata?.generateName, reason: decision.message }, 'pod refused');
    return refuse(decision.message);
  }
  if (decision.kind === 'untouched') return { uid: request.uid, allowed: true };
  const selected = configs.find((c) => c.name === decision.shardingConfig);
  if (selected?.root && selected.shard === undefined) {
    return refuse(
      `pod ${namespace}/${pod.metadata?.name ?? pod.metadata?.generateName ?? ''} is selected by the auto-sharding root ${decision.shardingConfig}, ` +
        'which assigns shards to the pods its targetStatefulSet controls, by ordinal, and this pod is none of them',
    );
  }
  injector.logger.info({ namespace, pod: pod.metadata?.name ?? pod.metadata?.generateName, shardingConfig: decision.shardingConfig }, 'proxy sidecar injected');
  return { uid: request.uid, allowed: true, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(decision.patch)).toString('base64') };
}

/** Adds the injection route to the agent's (TLS) webhook server. */
export function registerInjectionRoute(app: FastifyInstance, injector: SidecarInjector): void {
  app.post(INJECT_PATH, async (req) => {
    const review = req.body as { request?: PodAdmissionRequest };
    if (!review.request?.uid) return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' };
    return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: await admitPod(review.request, injector) };
  });
}

/**
 * The webhook entry for pods: only labelled pods are sent (objectSelector, in every namespace), and failurePolicy
 * Fail, so a labelled pod is never created without its proxy; reinvoked when a later webhook changes the pod (injection is idempotent).
 */
export function injectionWebhook(clientConfig: AdmissionregistrationV1WebhookClientConfig): V1MutatingWebhook {
  return {
    name: 'pods.ctrlmesh.kusionstack.io',
    clientConfig,
    rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'], scope: 'Namespaced' }],
    objectSelector: { matchLabels: { [ENABLE_PROXY_LABEL]: 'true' } },
    failurePolicy: 'Fail',
    reinvocationPolicy: 'IfNeeded',
    sideEffects: 'None',
    admissionReviewVersions: ['v1'],
    timeoutSeconds: 10,
  };
}

/** Where the proxy finds its credentials (kubeconfig, NATS creds and CA): its shard's Secret in the operator's namespace. */
export const PROXY_CREDENTIALS_DIR = '/etc/ctrlmesh/credentials';
/** The keys of a shard's proxy Secret. */
export const PROXY_SECRET_KEYS = { kubeconfig: 'kubeconfig', natsCa: 'nats-ca.crt', natsCreds: 'nats.creds' } as const;
