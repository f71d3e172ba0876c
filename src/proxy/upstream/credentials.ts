import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { FileError } from '../../errors.js';
import type { ClusterCredentials } from './upstream.js';

function pem(data: string | undefined, file: string | undefined): string | undefined {
  if (data !== undefined) return Buffer.from(data, 'base64').toString('utf8');
  return file === undefined ? undefined : readFileSync(file, 'utf8');
}

/**
 * The proxy's credentials per cluster, from a kubeconfig whose context names are the registered cluster names
 * (client certificate and key, inline or as files, or a bearer token). Servers and CAs come from the route table.
 */
export function loadCredentials(path: string): Map<string, ClusterCredentials> {
  const config = new KubeConfig();
  try {
    config.loadFromFile(path);
  } catch (err) {
    throw new FileError(path, `not a readable kubeconfig (${(err as Error).message})`, { cause: err });
  }
  const credentials = new Map<string, ClusterCredentials>();
  for (const context of config.getContexts()) {
    const user = config.getUser(context.user);
    if (user === null) throw new FileError(path, `context "${context.name}" names user "${context.user}", which the file does not define`);
    try {
      const certPem = pem(user.certData, user.certFile);
      const keyPem = pem(user.keyData, user.keyFile);
      credentials.set(context.name, {
        ...(certPem === undefined ? {} : { certPem }),
        ...(keyPem === undefined ? {} : { keyPem }),
        ...(user.token === undefined ? {} : { token: user.token }),
      });
    } catch (err) {
      throw new FileError(path, `user "${context.user}": cannot read its certificate or key (${(err as Error).message})`, { cause: err });
    }
  }
  return credentials;
}
