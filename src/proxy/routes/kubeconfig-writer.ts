import type { Logger } from 'pino';
import type { RouteTable } from '../../transport/index.js';
import { writeFileAtomic } from './atomic-file.js';
import { operatorKubeconfig } from './operator-kubeconfig.js';

export interface KubeconfigWriterOptions {
  /** The file the operator reads (KUBECONFIG of an injected pod). */
  path: string;
  /** http://host:port of the proxy's API listener. */
  proxyUrl: string;
  logger: Logger;
}

/**
 * Keeps the operator's kubeconfig in step with the applied route table: a context per reachable cluster.
 * Written atomically, and only when its text changes (a bucket move changes nothing in it), so an operator
 * that re-reads the file never sees half of one.
 */
export function createKubeconfigWriter(options: KubeconfigWriterOptions): (table: RouteTable) => void {
  const { path, proxyUrl, logger } = options;
  let written = '';
  let writes: Promise<void> = Promise.resolve();
  return (table) => {
    const text = operatorKubeconfig(table, proxyUrl);
    if (text === written) return;
    written = text;
    const write = async (): Promise<void> => {
      await writeFileAtomic(path, text, 0o644);
      logger.info({ path, home: table.homeCluster, contexts: table.clusters.length }, "operator's kubeconfig written");
    };
    writes = writes.then(write).catch((err: unknown) => {
      written = '';
      logger.error({ err, path }, "cannot write the operator's kubeconfig");
    });
  };
}
