import { readFile } from 'node:fs/promises';
import type { CoreV1Api } from '@kubernetes/client-node';
import { PROXY_SECRET_KEYS, proxySecretName } from '../../src/agent/index.js';
import type { InstalledMesh } from '../../src/dev/index.js';
import { putSecret } from '../../src/dev/mesh/secrets.js';
import { mintCreds } from '../../src/transport/auth/index.js';

export interface OperatorSecretOptions {
  namespace: string;
  /** The agent's proxy.secretName (ctrlmesh-proxy by default): shard S's Secret is proxySecretName(secretName, S). */
  secretName: string;
  /** The operator's API identity on this cluster (e.g. a service account's token); the proxy's context is the cluster's name. */
  credentials: { server: string; caPem: string; token: string };
  /** The operator's ShardingConfig (namespace/name) and the shards (`<cluster>/<name>`) its pods may serve. */
  operator: string;
  shards: readonly string[];
}

/**
 * The Secrets the injected proxies read (docs/install.md, "The proxy Secret"), one per shard: the operator's
 * kubeconfig for this cluster, the NATS CA, and that shard's NATS identity, allowed to follow only its own route table.
 */
export async function putOperatorSecret(core: CoreV1Api, mesh: InstalledMesh, options: OperatorSecretOptions): Promise<void> {
  const issuerSeed = (await readFile(mesh.auth.issuerSeed, 'utf8')).trim();
  for (const shard of options.shards) {
    await putSecret(core, {
      namespace: options.namespace,
      name: proxySecretName(options.secretName, shard),
      data: {
        [PROXY_SECRET_KEYS.kubeconfig]: tokenKubeconfig(mesh.cluster, options.credentials),
        [PROXY_SECRET_KEYS.natsCa]: mesh.natsCaPem,
        [PROXY_SECRET_KEYS.natsCreds]: await mintCreds({ issuerSeed, account: mesh.auth.accountPublicKey, identity: { role: 'proxy', operator: options.operator, shard } }),
      },
    });
  }
}

/** A kubeconfig with one context, named after the cluster, for a bearer token. JSON is valid YAML. */
function tokenKubeconfig(name: string, credentials: OperatorSecretOptions['credentials']): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server: credentials.server, 'certificate-authority-data': Buffer.from(credentials.caPem).toString('base64') } }],
    users: [{ name, user: { token: credentials.token } }],
    contexts: [{ name, context: { cluster: name, user: name } }],
    'current-context': name,
  });
}
