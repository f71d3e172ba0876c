import Fastify, { type FastifyInstance } from 'fastify';
import {
  AdmissionregistrationV1Api,
  type AdmissionregistrationV1WebhookClientConfig,
  type KubeConfig,
  type V1MutatingWebhookConfiguration,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { isApiStatus } from '../kube/index.js';
import type { AgentMetrics } from '../metrics/index.js';
import { requestTimeoutChecks } from '../runtime/index.js';
import type { HashSettings } from '../sharding/index.js';
import { admit, type AdmissionRequest } from './admission.js';
import { INJECT_PATH, injectionWebhook, registerInjectionRoute, type SidecarInjector } from './sidecar-webhook.js';

export interface WebhookTls {
  certPem: string;
  keyPem: string;
  /** CA that signed the serving certificate: the caBundle the API server checks it with. */
  caPem: string;
}

export interface WebhookServerOptions {
  tls: WebhookTls;
  host: string;
  port: number;
  settings: HashSettings;
  skip: ReadonlySet<string>;
  logger: Logger;
  metrics: AgentMetrics;
  /** Serves sidecar injection too (pods labelled enable-proxy=true). */
  injector?: SidecarInjector;
  /**
   * How long a caller may take to send a whole review before 408 and a closed connection (default 30 s, the longest
   * an API server waits for a webhook): a client holding a body back would otherwise hold its connection forever.
   */
  readTimeoutMs?: number;
}

export const WEBHOOK_PATH = '/mutate';

/** The mutating admission webhook, over TLS: labels namespaces and related objects as they are created or updated. */
export async function startWebhookServer(options: WebhookServerOptions): Promise<{ app: FastifyInstance; port: number }> {
  // The API server keeps its connections to the webhook alive: one answering when the agent stops would hold the
  // server open until its keep-alive timeout (72 s). The configuration is deleted by then; a call cut off is ignored.
  const readTimeoutMs = options.readTimeoutMs ?? 30_000;
  const app = Fastify({
    logger: false,
    forceCloseConnections: true,
    requestTimeout: readTimeoutMs,
    https: { cert: options.tls.certPem, key: options.tls.keyPem, ...requestTimeoutChecks(readTimeoutMs) },
  });
  app.post(WEBHOOK_PATH, async (req) => {
    const review = req.body as { apiVersion?: string; request?: AdmissionRequest };
    if (!review.request?.uid) {
      options.logger.warn('admission review without a request; answered with an empty review');
      return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' };
    }
    const response = admit(review.request, options.settings, options.skip);
    options.metrics.admissionReviews.inc({ patched: response.patch ? 'true' : 'false' });
    return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
  });
  if (options.injector) registerInjectionRoute(app, options.injector);
  await app.listen({ host: options.host, port: options.port });
  const address = app.server.address();
  return { app, port: typeof address === 'object' && address ? address.port : options.port };
}

/**
 * Where the API server calls the agent: a URL (its path is the labelling route's, e.g. https://127.0.0.1:PORT/mutate),
 * or a Service the API server resolves to the agent's pods itself; a `.svc` URL would need cluster DNS on the
 * control plane, which many clusters do not give it.
 */
export type WebhookTarget = { url: string } | { service: { namespace: string; name: string; port: number } };

export interface WebhookRegistration {
  kc: KubeConfig;
  cluster: string;
  target: WebhookTarget;
  caPem: string;
  skip: readonly string[];
  /** Whether namespaces are labelled (`labelScope`): without, the namespaces rule is left out. */
  namespaces: boolean;
  /** Related resources to label (`labelScope`): only those whose objects the proxies select by label. */
  resources: readonly { group: string; resource: string }[];
  /** Whether to register the sidecar injection webhook (pods) too. */
  inject: boolean;
}

/** The clientConfig of one of the agent's routes (`WEBHOOK_PATH` or the injection path) on its target. */
export function webhookClientConfig(target: WebhookTarget, path: string, caPem: string): AdmissionregistrationV1WebhookClientConfig {
  const caBundle = Buffer.from(caPem).toString('base64');
  if ('url' in target) return { url: path === WEBHOOK_PATH ? target.url : new URL(path, target.url).href, caBundle };
  return { service: { ...target.service, path }, caBundle };
}

/** One MutatingWebhookConfiguration per registered cluster name, so agents of different clusters never collide. */
export function webhookConfigurationName(cluster: string): string {
  return `ctrlmesh-agent-${cluster}`.toLowerCase().replace(/[^a-z0-9.-]/g, '-');
}

/**
 * The MutatingWebhookConfiguration pointing the API server at the agent (failurePolicy Ignore: never blocks): a
 * labelling webhook for namespaces and one for related objects, each only when there is something to label, and
 * the sidecar injection webhook when asked.
 */
export function webhookConfiguration(options: WebhookRegistration): V1MutatingWebhookConfiguration {
  const clientConfig = webhookClientConfig(options.target, WEBHOOK_PATH, options.caPem);
  const namespaceSelector = {
    matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: [...options.skip] }],
  };
  const common = {
    clientConfig,
    failurePolicy: 'Ignore',
    sideEffects: 'None',
    admissionReviewVersions: ['v1'],
    timeoutSeconds: 5,
    namespaceSelector,
  };
  const groups = [...new Set(options.resources.map((r) => r.group))];
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: webhookConfigurationName(options.cluster) },
    webhooks: [
      ...(options.namespaces
        ? [
            {
              ...common,
              name: 'namespaces.ctrlmesh.kusionstack.io',
              rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['namespaces'], scope: 'Cluster' }],
            },
          ]
        : []),
      ...(options.resources.length
        ? [
            {
              ...common,
              name: 'objects.ctrlmesh.kusionstack.io',
              rules: groups.map((group) => ({
                apiGroups: [group],
                apiVersions: ['*'],
                operations: ['CREATE', 'UPDATE'],
                resources: options.resources.filter((r) => r.group === group).map((r) => r.resource),
                scope: 'Namespaced',
              })),
            },
          ]
        : []),
      ...(options.inject ? [injectionWebhook(webhookClientConfig(options.target, INJECT_PATH, options.caPem))] : []),
    ],
  };
}

/** Creates or replaces the agent's MutatingWebhookConfiguration. */
export async function registerWebhook(options: WebhookRegistration): Promise<void> {
  const api = options.kc.makeApiClient(AdmissionregistrationV1Api);
  const body = webhookConfiguration(options);
  const name = body.metadata?.name as string;
  try {
    const existing = await api.readMutatingWebhookConfiguration({ name });
    await api.replaceMutatingWebhookConfiguration({
      name,
      body: { ...body, metadata: { ...body.metadata, resourceVersion: existing.metadata?.resourceVersion } },
    });
  } catch (err) {
    if (!isApiStatus(err, 404)) throw err;
    await api.createMutatingWebhookConfiguration({ body });
  }
}

/**
 * On a clean shutdown, the API server should stop calling webhooks that will not answer, rather than wait out their
 * timeout on every write: the labelling webhooks go (they ignore failures, and the next agent's pass labels what
 * they missed). The injection webhook, when registered, stays: it fails closed, so a labelled pod created while no
 * agent runs is refused rather than created without its proxy: otherwise every agent restart would let such pods
 * through, to run unsharded on their own credentials (pinned by test/integration/injection.test.ts, 'stopped cleanly,
 * the agent keeps the injection webhook only: a labelled pod created meanwhile is refused, never created without its
 * proxy'). Without it the configuration is deleted (gone already is fine).
 */
export async function retireWebhook(options: { kc: KubeConfig; cluster: string; injection?: { target: WebhookTarget; caPem: string } }): Promise<void> {
  const { kc, cluster, injection } = options;
  if (injection) {
    await registerWebhook({ kc, cluster, ...injection, skip: [], namespaces: false, resources: [], inject: true });
    return;
  }
  try {
    await options.kc.makeApiClient(AdmissionregistrationV1Api).deleteMutatingWebhookConfiguration({ name: webhookConfigurationName(options.cluster) });
  } catch (err) {
    if (!isApiStatus(err, 404)) throw err;
  }
}
