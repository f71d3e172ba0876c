import { readFile } from 'node:fs/promises';
import type { CoreV1Api } from '@kubernetes/client-node';
import { PROXY_SECRET_KEYS, proxyCredsKey } from '../../src/agent/index.js';
import type { InstalledMesh } from '../../src/dev/index.js';
import { putSecret } from '../../src/dev/mesh/secrets.js';
import { mintCreds } from '../../src/transport/auth/index.js';

export interface OperatorSecretOptions {
  namespace: string;
  /** The agent's proxy.secretName (ctrlmesh-proxy by default). */
  secretName: string;
  /** The operator's API identity on this cluster (e.g. a service account's token); the proxy's context is the cluster's name. */
  credentials: { server: string; caPem: string; token: string };
  /** The operator's ShardingConfig (namespace/name) and the shards (`<cluster>/<name>`) its pods may serve. */
  operator: string;
  shards: readonly string[];
}

/**
 * The Secret an injected proxy reads (docs/install.md, "Secrets"): the operator's kubeconfig for this cluster, the
 * NATS CA, and one NATS identity per shard, each allowed to follow only its own shard's route table.
 */
export async function putOperatorSecret(core: CoreV1Api, mesh: InstalledMesh, options: OperatorSecretOptions): Promise<void> {
  const issuerSeed = (await readFile(mesh.auth.issuerSeed, 'utf8')).trim();
  const creds = await Promise.all(
    options.shards.map(async (shard) => [
      proxyCredsKey(shard),
      await mintCreds({ issuerSeed, account: mesh.auth.accountPublicKey, identity: { role: 'proxy', operator: options.operator, shard } }),
    ]),
  );
  await putSecret(core, {
    namespace: options.namespace,
    name: options.secretName,
    data: {
      [PROXY_SECRET_KEYS.kubeconfig]: tokenKubeconfig(mesh.cluster, options.credentials),
      [PROXY_SECRET_KEYS.natsCa]: mesh.natsCaPem,
      ...Object.fromEntries(creds),
    },
  });
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
