import { writeFile } from 'node:fs/promises';

/** What a kubeconfig needs to reach one cluster as one user: a client certificate and key, or a bearer token. */
export type KubeconfigEntry = {
  /** Names the cluster, the context and (with `-admin`) the user. */
  name: string;
  server: string;
  caPem: string;
} & ({ clientCertPem: string; clientKeyPem: string } | { token: string });

const base64 = (pem: string): string => Buffer.from(pem, 'utf8').toString('base64');

/** A kubeconfig with one context per entry, named after the cluster; the first is current. JSON is valid YAML. */
export function kubeconfigText(entries: readonly KubeconfigEntry[]): string {
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: entries.map((e) => ({ name: e.name, cluster: { server: e.server, 'certificate-authority-data': base64(e.caPem) } })),
    users: entries.map((e) => ({
      name: `${e.name}-admin`,
      user: 'token' in e ? { token: e.token } : { 'client-certificate-data': base64(e.clientCertPem), 'client-key-data': base64(e.clientKeyPem) },
    })),
    contexts: entries.map((e) => ({ name: e.name, context: { cluster: e.name, user: `${e.name}-admin` } })),
    'current-context': entries[0]?.name ?? '',
  };
  return `${JSON.stringify(config, null, 2)}\n`;
}

/** Writes a kubeconfig readable by its owner only: it holds a private key or a token. */
export async function writeKubeconfig(path: string, entries: readonly KubeconfigEntry[]): Promise<void> {
  await writeFile(path, kubeconfigText(entries), { mode: 0o600 });
}
