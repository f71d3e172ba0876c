import { setTimeout as sleep } from 'node:timers/promises';
import type { CoreV1Api } from '@kubernetes/client-node';
import { DEFAULT_LABEL_KEYS } from '../../sharding/index.js';

const PROBE_NAMESPACE = 'ctrlmesh-admission-probe';
const INTERVAL_MS = 250;

/**
 * Waits until the API server's admission calls reach the agent: a dry-run namespace create comes back with its
 * bucket label (the bed's `fnv` hash labels every namespace). A Ready agent pod is not yet that: its Service's
 * endpoints and the node's rules follow it, and the namespace webhook ignores failures, so a namespace created in
 * between would go unlabelled at admission.
 */
export async function awaitAdmissionLabels(options: { core: CoreV1Api; timeoutMs: number; onProgress: (message: string) => void; signal?: AbortSignal }): Promise<void> {
  const started = Date.now();
  let last = 'no answer yet';
  while (Date.now() - started < options.timeoutMs) {
    options.signal?.throwIfAborted();
    try {
      const created = await options.core.createNamespace({ body: { metadata: { name: PROBE_NAMESPACE } }, dryRun: 'All' });
      const bucket = created.metadata?.labels?.[DEFAULT_LABEL_KEYS.hash];
      if (bucket !== undefined) {
        options.onProgress(`admission labels namespaces (bucket ${bucket} on a dry run) ${((Date.now() - started) / 1000).toFixed(1)} s after the agent was Ready`);
        return;
      }
      last = 'a dry-run namespace came back without its bucket label';
    } catch (err) {
      last = (err as Error).message;
    }
    await sleep(INTERVAL_MS, undefined, options.signal ? { signal: options.signal } : {});
  }
  throw new Error(`the API server's admission did not reach the agent within ${options.timeoutMs / 1000} s: ${last}`);
}
