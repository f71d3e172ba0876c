import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createCertificateAuthority, generateKeyPairPem, issueCertificate, type IssuedCertificate } from './certs.js';
import { freePort } from './free-port.js';
import { writeKubeconfig } from './kubeconfig.js';
import { httpsStatus } from './probes.js';
import { ServerProcess, serverControl, type ServerControl, type ServerStartOptions } from './server-process.js';
import { resolveTool } from './tools.js';

export interface ApiServerOptions extends ServerStartOptions {
  /** The etcd to store in; this server keeps its objects under `/<name>`. */
  etcd: { url: string };
  /** The cluster's name: etcd prefix, kubeconfig context and cluster name. Its dir holds certificates and keys. */
  name: string;
  /** Where to write an audit log of every request at Metadata level (JSON lines), e.g. to judge what executed. */
  auditLogPath?: string;
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
  /** A client certificate for another user, e.g. to test RBAC as an agent's service identity. */
  issueClientCertificate(user: string, groups?: string[]): Promise<IssuedCertificate>;
}

const SERVICE_CIDR = '10.0.0.0/24';
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
    ipAddresses: ['127.0.0.1', KUBERNETES_SERVICE_IP],
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
  };
  await Promise.all([
    writeFile(files.ca, ca.certPem),
    writeFile(files.servingCert, serving.certPem),
    writeFile(files.servingKey, serving.keyPem, { mode: 0o600 }),
    writeFile(files.saPublic, serviceAccount.publicKeyPem),
    writeFile(files.saPrivate, serviceAccount.privateKeyPem, { mode: 0o600 }),
    writeKubeconfig(files.kubeconfig, [{ name, server, caPem: ca.certPem, clientCertPem: admin.certPem, clientKeyPem: admin.keyPem }]),
    ...(options.auditLogPath === undefined ? [] : [writeFile(files.auditPolicy, AUDIT_POLICY)]),
  ]);
  const audit =
    options.auditLogPath === undefined
      ? []
      : [`--audit-policy-file=${files.auditPolicy}`, `--audit-log-path=${options.auditLogPath}`, '--audit-log-format=json', '--audit-log-mode=blocking'];

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
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      '--allow-privileged=true',
      '--disable-admission-plugins=ServiceAccount',
      '--authorization-mode=RBAC',
      `--service-account-issuer=${server}`,
      `--service-account-key-file=${files.saPublic}`,
      `--service-account-signing-key-file=${files.saPrivate}`,
      ...audit,
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
    issueClientCertificate: (user, groups = []) => issueCertificate({ ca, commonName: user, organizations: groups, usage: 'client' }),
  };
}
