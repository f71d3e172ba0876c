import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import yaml from 'js-yaml';
import { FileError } from '../../errors.js';
import type { ClusterCredentials } from './upstream.js';

/** A kubeconfig's `users[].user`, the fields the proxy reads. */
interface KubeconfigUser {
  'client-certificate-data'?: unknown;
  'client-certificate'?: unknown;
  'client-key-data'?: unknown;
  'client-key'?: unknown;
  token?: unknown;
  tokenFile?: unknown;
}

const text = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);
const entries = (value: unknown): Record<string, unknown>[] =>
  Array.isArray(value) ? value.filter((e): e is Record<string, unknown> => e !== null && typeof e === 'object') : [];

/** A file the kubeconfig names, read relative to the kubeconfig's folder as kubectl reads it. */
function fileNamed(file: unknown, folder: string): string | undefined {
  const path = text(file);
  return path === undefined ? undefined : readFileSync(resolve(folder, path), 'utf8');
}

/** Inline data (base64) or a file the kubeconfig names. */
function pem(data: unknown, file: unknown, folder: string): string | undefined {
  const inline = text(data);
  return inline === undefined ? fileNamed(file, folder) : Buffer.from(inline, 'base64').toString('utf8');
}

/**
 * The proxy's credentials per cluster, from a kubeconfig whose context names are the registered cluster names
 * (client certificate and key, inline or as files, or a bearer token, inline or as a file). Servers and CAs come from
 * the route table. Read with a YAML parser alone: the Kubernetes client library would cost the sidecar more memory
 * than everything else it loads (docs/proxy.md, Figures).
 */
export function loadCredentials(path: string): Map<string, ClusterCredentials> {
  let config: unknown;
  try {
    config = yaml.load(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new FileError(path, `not a readable kubeconfig (${(err as Error).message})`, { cause: err });
  }
  if (config === null || typeof config !== 'object' || Array.isArray(config)) throw new FileError(path, 'not a readable kubeconfig (not a YAML mapping)');
  const { contexts, users } = config as { contexts?: unknown; users?: unknown };
  const folder = dirname(path);
  // The first user of a name counts, as for kubectl.
  const byName = new Map<string, KubeconfigUser>();
  for (const entry of entries(users)) {
    const name = text(entry.name);
    if (name !== undefined && !byName.has(name)) byName.set(name, (entry.user ?? {}) as KubeconfigUser);
  }
  const credentials = new Map<string, ClusterCredentials>();
  for (const [i, context] of entries(contexts).entries()) {
    const name = text(context.name);
    if (name === undefined) throw new FileError(path, `contexts[${i}].name is missing`);
    const userName = text((context.context as { user?: unknown } | null | undefined)?.user);
    const user = userName === undefined ? undefined : byName.get(userName);
    if (user === undefined) throw new FileError(path, `context "${name}" names user "${userName ?? ''}", which the file does not define`);
    try {
      const certPem = pem(user['client-certificate-data'], user['client-certificate'], folder);
      const keyPem = pem(user['client-key-data'], user['client-key'], folder);
      const token = text(user.token) ?? fileNamed(user.tokenFile, folder)?.trim();
      credentials.set(name, {
        ...(certPem === undefined ? {} : { certPem }),
        ...(keyPem === undefined ? {} : { keyPem }),
        ...(token === undefined ? {} : { token }),
      });
    } catch (err) {
      throw new FileError(path, `user "${userName}": cannot read its certificate, key or token (${(err as Error).message})`, { cause: err });
    }
  }
  return credentials;
}
