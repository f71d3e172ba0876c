import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createCertificateAuthority, generateKeyPairPem, issueCertificate, type IssuedCertificate } from '../tls/index.js';
import { freePort } from './free-port.js';
import { writeKubeconfig } from './kubeconfig.js';
import { httpsStatus } from './probes.js';
import { DEFAULT_KUBE_VERSION } from './kube-versions.js';
import { ServerProcess, serverControl, type ServerControl, type ServerStartOptions } from './server-process.js';
import { resolveTool } from './tools.js';

export interface ApiServerOptions extends ServerStartOptions {
  /** The etcd to store in; this server keeps its objects under `/<name>`. */
  etcd: { url: string };
  /** The cluster's name: etcd prefix, kubeconfig context and cluster name. Its dir holds certificates and keys. */
  name: string;
  /** Where to write an audit log of every request at Metadata level (JSON lines), e.g. to judge what executed. */
  auditLogPath?: string;
  /**
   * Serve a real node (src/dev/node) too: listen on every interface and advertise `address` (the `kubernetes`
   * Service's endpoint, which pods reach; 127.0.0.1 inside a pod is the pod), name it in the serving certificate,
   * keep the ServiceAccount admission plugin (pods need their token volumes), authorize kubelets with the Node
   * authorizer, and reach kubelets (logs, exec) with a client certificate of its own. Without it the server is
   * envtest's: loopback only, no ServiceAccount admission.
   */
  node?: { address: string };
  /**
   * Serve HTTP/1.1 only (`--disable-http2-serving`), as an API server behind a load balancer that offers no HTTP/2:
   * a proxy's watches then go as HTTP/1.1 requests.
   */
  disableHttp2?: boolean;
}

/** Every request, at Metadata level: who, verb, objectRef and request URI, no bodies. */
const AUDIT_POLICY = JSON.stringify({ apiVersion: 'audit.k8s.io/v1', kind: 'Policy', omitStages: ['RequestReceived'], rules: [{ level: 'Metadata' }] });

/** A cluster's connection details: plain data, so it can cross process boundaries (vitest's provide/inject). */
export interface ClusterInfo {
  name: string;
  /** https://127.0.0.1:PORT */
  server: string;
  /** The cluster's CA: it signs the serving certificate and the client certificates the server accepts. */
  caPem: string;
  /** The admin client certificate (group system:masters). */
  clientCertPem: string;
  clientKeyPem: string;
  /** A kubeconfig for the admin, with one context named after the cluster. */
  kubeconfigPath: string;
}

export interface ApiServerHandle extends ClusterInfo, ServerControl {
  dir: string;
  /** The address advertised to pods when started with `node`: a real node may join this cluster only then. */
  nodeAddress?: string;
  /** A client certificate for another user, e.g. to test RBAC as an agent's service identity. */
  issueClientCertificate(user: string, groups?: string[]): Promise<IssuedCertificate>;
}

export const SERVICE_CIDR = '10.0.0.0/24';
// The first address of the service range: the in-cluster `kubernetes` service, which a serving cert should name.
const KUBERNETES_SERVICE_IP = '10.0.0.1';
const ADMIN_USER = 'ctrlmesh-admin';

/**
 * One kube-apiserver on 127.0.0.1 with its own CA, admin client certificate and service-account keys, using the
 * flags controller-runtime's envtest uses. Ready once /readyz answers 200 to the admin.
 */
export async function startApiServer(options: ApiServerOptions): Promise<ApiServerHandle> {
  const { name, dir } = options;
  const binary = options.binary ?? (await resolveTool('kube-apiserver', options)).path;
  await mkdir(dir, { recursive: true });
  const port = await freePort();
  const server = `https://127.0.0.1:${port}`;

  const ca = await createCertificateAuthority({ commonName: `ctrlmesh-testbed-${name}-ca` });
  const serving = await issueCertificate({
    ca,
    commonName: 'kube-apiserver',
    usage: 'server',
    dnsNames: ['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc'],
    ipAddresses: ['127.0.0.1', KUBERNETES_SERVICE_IP, ...(options.node ? [options.node.address] : [])],
  });
  const admin = await issueCertificate({ ca, commonName: ADMIN_USER, organizations: ['system:masters'], usage: 'client' });
  const serviceAccount = await generateKeyPairPem();
  const files = {
    ca: join(dir, 'ca.crt'),
    servingCert: join(dir, 'apiserver.crt'),
    servingKey: join(dir, 'apiserver.key'),
    saPublic: join(dir, 'sa.pub'),
    saPrivate: join(dir, 'sa.key'),
    kubeconfig: join(dir, 'kubeconfig'),
    auditPolicy: join(dir, 'audit-policy.json'),
    kubeletClientCert: join(dir, 'kubelet-client.crt'),
    kubeletClientKey: join(dir, 'kubelet-client.key'),
  };
  // kube-apiserver's identity towards kubelets: the kubelet checks it against the cluster CA and asks the API server
  // (SubjectAccessReview) whether it may read logs or exec; system:masters may.
  const kubeletClient = options.node
    ? await issueCertificate({ ca, commonName: 'kube-apiserver-kubelet-client', organizations: ['system:masters'], usage: 'client' })
    : undefined;
  await Promise.all([
    writeFile(files.ca, ca.certPem),
    writeFile(files.servingCert, serving.certPem),
    writeFile(files.servingKey, serving.keyPem, { mode: 0o600 }),
    writeFile(files.saPublic, serviceAccount.publicKeyPem),
    writeFile(files.saPrivate, serviceAccount.privateKeyPem, { mode: 0o600 }),
    writeKubeconfig(files.kubeconfig, [{ name, server, caPem: ca.certPem, clientCertPem: admin.certPem, clientKeyPem: admin.keyPem }]),
    ...(options.auditLogPath === undefined ? [] : [writeFile(files.auditPolicy, AUDIT_POLICY)]),
    ...(kubeletClient
      ? [writeFile(files.kubeletClientCert, kubeletClient.certPem), writeFile(files.kubeletClientKey, kubeletClient.keyPem, { mode: 0o600 })]
      : []),
  ]);
  const audit =
    options.auditLogPath === undefined
      ? []
      : [`--audit-policy-file=${files.auditPolicy}`, `--audit-log-path=${options.auditLogPath}`, '--audit-log-format=json', '--audit-log-mode=blocking'];
  const network = options.node
    ? [
        '--bind-address=0.0.0.0',
        `--advertise-address=${options.node.address}`,
        // Node (a kubelet may read what its pods need and write its Node and pods' status) before RBAC; the
        // NodeRestriction admission plugin keeps a kubelet to its own Node object.
        '--authorization-mode=Node,RBAC',
        '--enable-admission-plugins=NodeRestriction',
        `--kubelet-client-certificate=${files.kubeletClientCert}`,
        `--kubelet-client-key=${files.kubeletClientKey}`,
        // The node's name is no DNS name: dial its InternalIP. No --kubelet-certificate-authority: the kubelet's
        // serving certificate is self-signed, so it is not verified.
        '--kubelet-preferred-address-types=InternalIP,Hostname',
      ]
    : ['--bind-address=127.0.0.1', '--advertise-address=127.0.0.1', '--disable-admission-plugins=ServiceAccount', '--authorization-mode=RBAC'];

  const identity = { caPem: ca.certPem, certPem: admin.certPem, keyPem: admin.keyPem };
  const apiServer = new ServerProcess({
    name: `kube-apiserver ${name}`,
    binary,
    dir,
    logFileName: 'kube-apiserver.log',
    args: [
      `--etcd-servers=${options.etcd.url}`,
      `--etcd-prefix=/${name}`,
      `--cert-dir=${dir}`,
      `--tls-cert-file=${files.servingCert}`,
      `--tls-private-key-file=${files.servingKey}`,
      `--client-ca-file=${files.ca}`,
      `--secure-port=${port}`,
      ...network,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      '--allow-privileged=true',
      `--service-account-issuer=${server}`,
      `--service-account-key-file=${files.saPublic}`,
      `--service-account-signing-key-file=${files.saPrivate}`,
      ...audit,
      ...(options.disableHttp2 ? ['--disable-http2-serving'] : []),
      // What a newer minor alone runs with (its shard-selector gate; src/dev/kube-versions.ts); nothing for the default.
      ...(options.kubeVersion ?? DEFAULT_KUBE_VERSION).apiServerArgs,
    ],
    probe: async () => (await httpsStatus(`${server}/readyz`, identity)) === 200,
    // A cold kube-apiserver on 2 busy cores needs well over the usual few seconds.
    readyTimeoutMs: 120_000,
    stopTimeoutMs: 15_000,
    logger: options.logger,
  });
  await apiServer.start(options.signal);
  return {
    ...serverControl(apiServer),
    name,
    server,
    caPem: ca.certPem,
    clientCertPem: admin.certPem,
    clientKeyPem: admin.keyPem,
    kubeconfigPath: files.kubeconfig,
    dir,
    ...(options.node ? { nodeAddress: options.node.address } : {}),
    issueClientCertificate: (user, groups = []) => issueCertificate({ ca, commonName: user, organizations: groups, usage: 'client' }),
  };
}
