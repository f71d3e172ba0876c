import { randomBytes } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { ensureNamespace } from '../../kube/index.js';
import { createAuthSetup, writeAuthSetup, type AuthFiles } from '../../transport/auth/index.js';
import { createCertificateAuthority, issueCertificate } from '../../tls/index.js';
import { parseImageRef } from '../images/index.js';
import { packageRoot } from '../package-root.js';
import { awaitAdmissionLabels } from './admission.js';
import { helmInstall } from './helm.js';
import { putSecret } from './secrets.js';

/** The namespace of the mesh's own pods. */
export const MESH_NAMESPACE = 'ctrlmesh-system';
/** Release names: the NATS chart's resources are named after its release (it contains the chart's name). */
const RELEASES = { nats: 'ctrlmesh-nats', hub: 'hub', agent: 'agent' } as const;
const NATS_SERVICE = 'ctrlmesh-nats';

export interface MeshInstallOptions {
  /** The cluster's admin kubeconfig. */
  kubeconfigPath: string;
  /** The cluster's name in the hub's registry. */
  cluster: string;
  images: { controllermesh: string; nats: string };
  helm: string;
  /** Holds the NATS identities and CA, and the values files of each release. */
  dir: string;
  /**
   * The NATS Service's fixed ClusterIP: the hub, the agent and the proxies reach NATS by this address, which its
   * certificate names, so no cluster DNS is needed.
   */
  natsClusterIp: string;
  /** Kinds the operators shard (the agent's rbac.relatedResources). */
  relatedResources: { apiGroups: string[]; resources: string[] }[];
  hubReplicas?: number;
  onProgress: (message: string) => void;
  signal?: AbortSignal;
}

/** What operators on the mesh need from it: where NATS is, its CA, and the identities to mint proxy creds from. */
export interface InstalledMesh {
  namespace: string;
  cluster: string;
  natsUrl: string;
  natsCaPem: string;
  auth: AuthFiles;
  releases: typeof RELEASES;
}

/**
 * Installs the mesh into a cluster with a node, as docs/install.md tells a user to: the Secrets first (NATS TLS and
 * accounts from `ctrlmesh nats-auth init`'s files, the hub's keys and tokens, the agent's bootstrap identity and
 * token), then the NATS, hub and agent charts, each waited on until its pods pass their readiness probes, and last
 * until the API server's admission reaches the agent.
 */
export async function installMesh(options: MeshInstallOptions): Promise<InstalledMesh> {
  const ns = MESH_NAMESPACE;
  const kc = new KubeConfig();
  kc.loadFromFile(options.kubeconfigPath);
  const core = kc.makeApiClient(CoreV1Api);
  await mkdir(options.dir, { recursive: true, mode: 0o700 });
  await ensureNamespace(core, ns);

  options.onProgress('minting the NATS accounts, the hub keys, a bootstrap token and the NATS server certificate');
  const auth = await writeAuthSetup(join(options.dir, 'auth'), await createAuthSetup());
  const ca = await createCertificateAuthority({ commonName: 'ctrlmesh-nats-ca' });
  const serving = await issueCertificate({
    ca,
    commonName: NATS_SERVICE,
    usage: 'server',
    dnsNames: [NATS_SERVICE, `${NATS_SERVICE}.${ns}`, `${NATS_SERVICE}.${ns}.svc`, `*.${NATS_SERVICE}-headless.${ns}.svc`],
    ipAddresses: [options.natsClusterIp],
  });
  const token = randomBytes(24).toString('base64url');
  const file = (path: string): Promise<string> => readFile(path, 'utf8');
  await Promise.all([
    putSecret(core, { namespace: ns, name: 'ctrlmesh-nats-tls', type: 'kubernetes.io/tls', data: { 'tls.crt': serving.certPem, 'tls.key': serving.keyPem, 'ca.crt': ca.certPem } }),
    putSecret(core, { namespace: ns, name: 'ctrlmesh-nats-auth', data: { 'resolver.conf': await file(auth.resolverConf) } }),
    putSecret(core, { namespace: ns, name: 'ctrlmesh-nats-ca', data: { 'ca.crt': ca.certPem } }),
    putSecret(core, {
      namespace: ns,
      name: 'ctrlmesh-hub-nats',
      data: { 'hub.creds': await file(auth.hubCreds), 'route-signing.nk': await file(auth.routeSigningSeed), 'issuer.nk': await file(auth.issuerSeed) },
    }),
    putSecret(core, { namespace: ns, name: 'ctrlmesh-hub-tokens', data: { tokens: `${options.cluster} ${token}\n` } }),
    putSecret(core, { namespace: ns, name: 'ctrlmesh-agent-nats', data: { 'bootstrap.creds': await file(auth.bootstrapCreds) } }),
    putSecret(core, { namespace: ns, name: 'ctrlmesh-bootstrap-token', data: { token } }),
  ]);

  const natsUrl = `tls://${options.natsClusterIp}:4222`;
  // Imported into the node's containerd, from no registry: never pulled.
  const image = (ref: string): Record<string, unknown> => {
    const { repository, tag } = parseImageRef(ref);
    return { repository, tag, pullPolicy: 'Never' };
  };
  const helm = { helm: options.helm, kubeconfigPath: options.kubeconfigPath, dir: options.dir, onProgress: options.onProgress, timeoutSeconds: 300, signal: options.signal };
  const charts = join(packageRoot(), 'charts');
  await helmInstall(
    { name: RELEASES.nats, namespace: ns, chart: join(charts, 'ctrlmesh-nats'), values: { image: image(options.images.nats), service: { clusterIP: options.natsClusterIp } } },
    helm,
  );
  await helmInstall(
    {
      name: RELEASES.hub,
      namespace: ns,
      chart: join(charts, 'ctrlmesh-hub'),
      values: { image: image(options.images.controllermesh), replicaCount: options.hubReplicas ?? 2, nats: { url: natsUrl } },
    },
    helm,
  );
  await helmInstall(
    {
      name: RELEASES.agent,
      namespace: ns,
      chart: join(charts, 'ctrlmesh-agent'),
      values: {
        image: image(options.images.controllermesh),
        clusterName: options.cluster,
        nats: { url: natsUrl },
        webhook: { injectProxy: true },
        proxy: { routeSigners: [auth.routeSigningPublicKey] },
        rbac: { relatedResources: options.relatedResources },
      },
    },
    helm,
  );
  await awaitAdmissionLabels({ core, timeoutMs: 60_000, onProgress: options.onProgress, ...(options.signal ? { signal: options.signal } : {}) });
  return { namespace: ns, cluster: options.cluster, natsUrl, natsCaPem: ca.certPem, auth, releases: RELEASES };
}
