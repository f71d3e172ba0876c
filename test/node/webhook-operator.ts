import type { KubernetesObject } from '@kubernetes/client-node';
import { parseMetricsText } from '../../src/demo/index.js';
import { createCertificateAuthority, issueCertificate } from '../../src/tls/index.js';
import { PROXY_OPS_PORT } from '../../src/transport/proxy-command.js';
import { rootConfig, statefulSet, type OperatorSpec } from './operators.js';

/** Where the operator container mounts its webhook certificate: controller-runtime's default certDir. */
export const CERT_DIR = '/tmp/k8s-webhook-server/serving-certs';
export const WEBHOOK_PORT = 9443;
/** The operator container's port name: the injection moves it to the proxy, so the Service's targetPort reaches it. */
export const WEBHOOK_PORT_NAME = 'webhook-server';
/** Only namespaces with this label are under the test's webhook (failurePolicy Fail must not touch anything else). */
export const WEBHOOK_NAMESPACE_LABEL = 'ctrlmesh.test/unique-key-webhook';

/** The certificate every shard mounts, issued for the webhook Service's name (what the API server verifies). */
export async function webhookCertificate(service: string, namespace: string): Promise<{ caPem: string; certPem: string; keyPem: string }> {
  const ca = await createCertificateAuthority({ commonName: `${service}-ca` });
  const serving = await issueCertificate({ ca, commonName: `${service}.${namespace}.svc`, dnsNames: [`${service}.${namespace}.svc`, `${service}.${namespace}.svc.cluster.local`], usage: 'server' });
  return { caPem: ca.certPem, ...serving };
}

const base64 = (text: string): string => Buffer.from(text).toString('base64');

/**
 * An operator serving the sample validating webhook (src/sample-operator/webhook.ts) from every shard, as its
 * author would deploy it: the certificate in a Secret mounted at certDir, the webhook port named on the operator's
 * container, a Service with that named targetPort, the root ShardingConfig with spec.webhook, and a
 * ValidatingWebhookConfiguration (failurePolicy Fail) for the ConfigMaps `app=<selector>` of the labelled namespaces.
 */
export function webhookOperatorObjects(op: OperatorSpec, shards: number, cert: { caPem: string; certPem: string; keyPem: string }, service: string): KubernetesObject[] {
  const secret = `${service}-certs`;
  const root = rootConfig(op, shards) as KubernetesObject & { spec: Record<string, unknown> };
  root.spec = { ...root.spec, webhook: { certDir: CERT_DIR, port: WEBHOOK_PORT } };
  const set = statefulSet(op, shards) as KubernetesObject & {
    spec: { template: { spec: { containers: Record<string, unknown>[]; volumes?: unknown[] } } };
  };
  const pod = set.spec.template.spec;
  pod.containers = pod.containers.map((c) => ({
    ...c,
    ports: [{ name: WEBHOOK_PORT_NAME, containerPort: WEBHOOK_PORT, protocol: 'TCP' }],
    volumeMounts: [{ name: 'webhook-certs', mountPath: CERT_DIR, readOnly: true }],
    // Ready (an endpoint in the route tables and behind the Service) once its webhook listens.
    readinessProbe: { tcpSocket: { port: WEBHOOK_PORT }, periodSeconds: 1 },
  }));
  pod.volumes = [{ name: 'webhook-certs', secret: { secretName: secret } }];
  return [
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: secret, namespace: op.namespace },
      type: 'kubernetes.io/tls',
      data: { 'tls.crt': base64(cert.certPem), 'tls.key': base64(cert.keyPem), 'ca.crt': base64(cert.caPem) },
    } as KubernetesObject,
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: service, namespace: op.namespace },
      spec: { selector: { app: op.name }, ports: [{ name: 'webhook', port: 443, targetPort: WEBHOOK_PORT_NAME, protocol: 'TCP' }] },
    } as KubernetesObject,
    root,
    set,
  ];
}

export function uniqueKeyWebhook(op: OperatorSpec, service: string, caPem: string, selector: Record<string, string>): KubernetesObject {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: { name: `${op.name}-unique-key` },
    webhooks: [
      {
        name: 'unique-key.sample-operator.ctrlmesh.io',
        clientConfig: { service: { namespace: op.namespace, name: service, path: '/validate', port: 443 }, caBundle: base64(caPem) },
        rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE', 'UPDATE'], resources: ['configmaps'], scope: 'Namespaced' }],
        namespaceSelector: { matchLabels: { [WEBHOOK_NAMESPACE_LABEL]: 'true' } },
        objectSelector: { matchLabels: selector },
        failurePolicy: 'Fail',
        sideEffects: 'None',
        admissionReviewVersions: ['v1'],
        timeoutSeconds: 10,
      },
    ],
  } as KubernetesObject;
}

/** One proxy's webhook figures from its /metrics: reviews by route and owner, and its latency histogram by route. */
export interface WebhookFigures {
  requests: { route: string; owner: string; count: number }[];
  /** Cumulative bucket counts by route (`le` in seconds), with the sum and count. */
  latency: Map<string, { buckets: [number, number][]; sum: number; count: number }>;
}

export async function webhookFigures(podIp: string): Promise<WebhookFigures> {
  const samples = parseMetricsText(await (await fetch(`http://${podIp}:${PROXY_OPS_PORT}/metrics`)).text());
  const requests = samples
    .filter((s) => s.name === 'ctrlmesh_proxy_webhook_requests_total')
    .map((s) => ({ route: s.labels.route ?? '', owner: s.labels.owner ?? '', count: s.value }));
  const latency: WebhookFigures['latency'] = new Map();
  for (const s of samples) {
    const route = s.labels.route;
    if (!route || !s.name.startsWith('ctrlmesh_proxy_webhook_seconds')) continue;
    const entry = latency.get(route) ?? { buckets: [], sum: 0, count: 0 };
    if (s.name.endsWith('_bucket')) entry.buckets.push([Number(s.labels.le === '+Inf' ? Infinity : s.labels.le), s.value]);
    else if (s.name.endsWith('_sum')) entry.sum = s.value;
    else if (s.name.endsWith('_count')) entry.count = s.value;
    latency.set(route, entry);
  }
  return { requests, latency };
}

/** What a proxy's figures grew by between two scrapes (counters and histograms only grow). */
export function figuresSince(now: WebhookFigures, before: WebhookFigures | undefined): WebhookFigures {
  const count = (route: string, owner: string): number => before?.requests.find((r) => r.route === route && r.owner === owner)?.count ?? 0;
  const latency: WebhookFigures['latency'] = new Map();
  for (const [route, l] of now.latency) {
    const old = before?.latency.get(route);
    const bucket = (le: number): number => old?.buckets.find(([b]) => b === le)?.[1] ?? 0;
    latency.set(route, { buckets: l.buckets.map(([le, n]) => [le, n - bucket(le)]), sum: l.sum - (old?.sum ?? 0), count: l.count - (old?.count ?? 0) });
  }
  return { requests: now.requests.map((r) => ({ ...r, count: r.count - count(r.route, r.owner) })), latency };
}

/** One line of a proxy's figures: reviews by route and owner, and mean, p50 and p99 (bucket bounds) by route. */
export function formatFigures(f: WebhookFigures): string {
  const routes = f.requests.filter((r) => r.count > 0).map((r) => `${r.route}${r.owner ? `→${r.owner.split('/')[1]}` : ''} ${r.count}`);
  const ms = (seconds: number): string => `${Number((seconds * 1000).toFixed(1))} ms`;
  const latency = [...f.latency]
    .filter(([, l]) => l.count > 0)
    .map(([route, l]) => `${route} mean ${ms(l.sum / l.count)}, p50 <= ${ms(quantileBound(l.buckets, 0.5))}, p99 <= ${ms(quantileBound(l.buckets, 0.99))}`);
  return `${routes.join(', ') || 'none'}; ${latency.join('; ')}`;
}

/** The upper bound of the histogram bucket holding quantile `q` (as histogram_quantile would land in it). */
export function quantileBound(buckets: readonly [number, number][], q: number): number {
  const sorted = [...buckets].sort((a, b) => a[0] - b[0]);
  const total = sorted.at(-1)?.[1] ?? 0;
  return sorted.find(([, cumulative]) => cumulative >= q * total)?.[0] ?? Infinity;
}
