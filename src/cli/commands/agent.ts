import { AGENT_DEFAULTS, AgentOptionsSchema, parseAgentOptions, startAgent, type AgentOptions } from '../../agent/index.js';
import { UsageError } from '../../errors.js';
import { inClusterKubeConfig, loadKubeConfig } from '../../kube/index.js';
import { intValue, requiredString, stringList, stringValue, usableOptions, type Command, type CommandContext } from '../command.js';
import { hashAlgorithmFlag, hashAlgorithmValue, parseLabels, parseListen, readFlagFile, readTokens, untilAborted } from './flags.js';
import { natsOptions, requiredNatsConfig, routeSignerKeys } from './nats-flags.js';

/** The name of the Secrets, one per shard in each operator pod's namespace, the injected proxies take their credentials from (docs/install.md). */
const DEFAULT_PROXY_SECRET = 'ctrlmesh-proxy';

/** The injected proxy: its image, the hub's route-signing keys it trusts, the Secret it mounts; undefined without --proxy-image. */
function sidecarOptions(ctx: CommandContext): AgentOptions['sidecar'] {
  const image = stringValue(ctx, 'proxy-image');
  const signers = routeSignerKeys(ctx, 'proxy-route-signer');
  const secret = stringValue(ctx, 'proxy-secret');
  if (!image) {
    if (signers.length || secret !== undefined) throw new UsageError('--proxy-route-signer and --proxy-secret configure the injected proxy: give --proxy-image too');
    return undefined;
  }
  if (signers.length === 0) {
    throw new UsageError(
      "--proxy-image needs --proxy-route-signer: the public key (N...) of the hub's --signing-key, which the injected proxies " +
        'trust (route-signing.pub of `ctrlmesh nats-auth init`)',
    );
  }
  const secretName = secret ?? DEFAULT_PROXY_SECRET;
  if (!/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(secretName) || secretName.length > 253) {
    throw new UsageError(`--proxy-secret must be a Secret name (lower-case DNS subdomain), not "${secretName}"`);
  }
  return { image, routeSigners: signers, secretName };
}

function webhookOptions(ctx: CommandContext): AgentOptions['webhook'] {
  const cert = stringValue(ctx, 'webhook-cert');
  const key = stringValue(ctx, 'webhook-key');
  const ca = stringValue(ctx, 'webhook-ca');
  const listenFlag = stringValue(ctx, 'webhook-listen');
  if (!cert && !key && !ca && !listenFlag) return undefined;
  if ((cert || key || ca) && !(cert && key && ca)) throw new UsageError('--webhook-cert, --webhook-key and --webhook-ca go together');
  const listen = parseListen('webhook-listen', listenFlag ?? '127.0.0.1:9443');
  const url = stringValue(ctx, 'webhook-url');
  const service = stringValue(ctx, 'webhook-service');
  if (url && service) throw new UsageError('--webhook-url and --webhook-service exclude each other: the API server calls one or the other');
  return {
    ...(cert && key && ca
      ? { tls: { certPem: readFlagFile('webhook-cert', cert), keyPem: readFlagFile('webhook-key', key), caPem: readFlagFile('webhook-ca', ca) } }
      : {}),
    host: listen.host,
    port: listen.port,
    ...(url ? { target: { url } } : service ? { target: { service: parseWebhookService(service) } } : {}),
  };
}

/** `NAMESPACE/NAME[:PORT]` (port 443 by default), the Service in front of the agent's webhook. */
function parseWebhookService(value: string): { namespace: string; name: string; port: number } {
  const match = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-a-z0-9]*[a-z0-9])?)(?::(\d{1,5}))?$/.exec(value);
  const port = match?.[5] === undefined ? 443 : Number(match[5]);
  if (!match || port < 1 || port > 65535) throw new UsageError(`--webhook-service must be NAMESPACE/NAME[:PORT] (a Service of this cluster), not "${value}"`);
  return { namespace: match[1] as string, name: match[3] as string, port };
}

export const agentCommand: Command = {
  name: 'agent',
  summary: "Run one cluster's agent: register it with the hub, report it, label it, serve its admission webhook.",
  usage: '--cluster NAME [--kubeconfig FILE] --nats URL --token-file FILE [options]',
  details: [
    'The agent is the only ControllerMesh process holding the cluster\'s admin credentials; the hub only gets its',
    'name, labels, API endpoint and CA. With --webhook-listen it serves a mutating webhook over TLS and registers',
    'it (a MutatingWebhookConfiguration, failurePolicy Ignore); without --webhook-cert/-key/-ca it mints its own',
    'CA and serving certificate in memory.',
  ].join('\n'),
  options: {
    cluster: { type: 'string', valueName: 'NAME', description: 'name of this cluster in the registry' },
    kubeconfig: {
      type: 'string',
      valueName: 'FILE',
      description: "kubeconfig with the cluster's admin credentials (default: in a pod, the pod's service account)",
    },
    ...natsOptions,
    'token-file': { type: 'string', valueName: 'FILE', description: 'bootstrap token of this cluster (first line)' },
    label: { type: 'string', multiple: true, valueName: 'KEY=VALUE', description: 'cluster label for the registry (repeatable)' },
    'hash-algorithm': hashAlgorithmFlag(' (default fnv)'),
    'advertise-server': { type: 'string', valueName: 'URL', description: 'API server URL proxies should use (default: the kubeconfig\'s)' },
    listen: { type: 'string', valueName: 'HOST:PORT', description: `/healthz /readyz /metrics (default ${AGENT_DEFAULTS.listen.host}:${AGENT_DEFAULTS.listen.port})` },
    'webhook-listen': { type: 'string', valueName: 'HOST:PORT', description: 'webhook address (default 127.0.0.1:9443)' },
    'webhook-url': { type: 'string', valueName: 'URL', description: 'URL the API server calls (default https://HOST:PORT/mutate)' },
    'webhook-service': {
      type: 'string',
      valueName: 'NAMESPACE/NAME[:PORT]',
      description: 'instead of --webhook-url: the Service in front of the agent, which the API server resolves itself (port 443 by default)',
    },
    'webhook-cert': { type: 'string', valueName: 'FILE', description: 'webhook serving certificate (PEM)' },
    'webhook-key': { type: 'string', valueName: 'FILE', description: 'its private key (PEM)' },
    'webhook-ca': { type: 'string', valueName: 'FILE', description: 'CA that signed it (becomes the caBundle)' },
    'proxy-image': { type: 'string', valueName: 'IMAGE', description: 'inject the proxy sidecar (this image) into pods labelled ctrlmesh.kusionstack.io/enable-proxy=true' },
    'proxy-route-signer': {
      type: 'string',
      multiple: true,
      valueName: 'KEY',
      description: "with --proxy-image: public key (N...) of the hub's route-signing key the proxies trust (repeatable)",
    },
    'proxy-secret': {
      type: 'string',
      valueName: 'NAME',
      description: `with --proxy-image: the proxy Secrets of the pod's namespace, NAME.<cluster>.<shard> per shard, with its kubeconfig, NATS CA and creds (default ${DEFAULT_PROXY_SECRET})`,
    },
    'label-qps': { type: 'string', valueName: 'N', description: `label patches per second at most (default ${AGENT_DEFAULTS.labelQps})` },
  },
  run: async (ctx) => {
    const algorithm = hashAlgorithmValue(ctx) ?? 'fnv';
    const listen = stringValue(ctx, 'listen');
    const advertised = stringValue(ctx, 'advertise-server');
    const kubeconfig = stringValue(ctx, 'kubeconfig');
    const webhook = webhookOptions(ctx);
    const sidecar = sidecarOptions(ctx);
    const options = usableOptions(
      parseAgentOptions({
        ...AGENT_DEFAULTS,
        cluster: requiredString(ctx, 'cluster'),
        clusterLabels: parseLabels('label', stringList(ctx, 'label')),
        nats: requiredNatsConfig(ctx),
        token: readTokens(requiredString(ctx, 'token-file'))[0],
        hash: { algorithm },
        labelQps: intValue(ctx, 'label-qps', AGENT_DEFAULTS.labelQps, AgentOptionsSchema.properties.labelQps),
        listen: listen ? parseListen('listen', listen) : AGENT_DEFAULTS.listen,
        ...(advertised ? { advertisedServer: advertised } : {}),
        ...(webhook ? { webhook } : {}),
        ...(sidecar ? { sidecar } : {}),
      }),
    );
    const kc = kubeconfig ? loadKubeConfig(kubeconfig) : inClusterKubeConfig(ctx.env);
    const agent = await startAgent(options, { kc, logger: ctx.logger });
    ctx.stdout.write(`agent of cluster ${options.cluster} serving ${agent.url}\n`);
    await untilAborted(ctx.signal);
    await agent.stop();
    return 0;
  },
};
