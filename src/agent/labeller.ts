import { KubernetesObjectApi, PatchStrategy, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { isApiStatus } from '../kube/index.js';
import type { AgentMetrics } from '../metrics/index.js';
import type { HashSettings } from '../sharding/index.js';
import { meshLabels, missingLabels } from './labels.js';
import { labelsResource, type LabelScope } from './related.js';

export interface LabelTarget {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
  labels: Record<string, string>;
}

/**
 * What still needs labels (pure): each namespace with its own bucket, each related object with its namespace's, as
 * far as `scope` labels them (`labelScope`). Objects already labelled are not listed, which is what lets an
 * interrupted pass resume where it stopped; labels out of scope are left as they are, never removed.
 */
export function labelWork(input: {
  namespaces: readonly KubernetesObject[];
  related: readonly { group: string; resource: string; apiVersion: string; kind: string; objects: readonly KubernetesObject[] }[];
  settings: HashSettings;
  skip: ReadonlySet<string>;
  scope: LabelScope;
}): LabelTarget[] {
  const work: LabelTarget[] = [];
  for (const ns of input.scope.namespaces ? input.namespaces : []) {
    const name = ns.metadata?.name;
    if (!name || input.skip.has(name)) continue;
    const missing = missingLabels(ns.metadata?.labels, meshLabels(name, input.settings));
    if (missing) work.push({ apiVersion: 'v1', kind: 'Namespace', name, labels: missing });
  }
  for (const { apiVersion, kind, objects } of input.related.filter((r) => labelsResource(input.scope, r))) {
    for (const obj of objects) {
      const namespace = obj.metadata?.namespace;
      const name = obj.metadata?.name;
      if (!namespace || !name || input.skip.has(namespace)) continue;
      const missing = missingLabels(obj.metadata?.labels, meshLabels(namespace, input.settings));
      if (missing) work.push({ apiVersion, kind, name, namespace, labels: missing });
    }
  }
  return work;
}

export interface LabellerOptions {
  kc: KubeConfig;
  logger: Logger;
  metrics: AgentMetrics;
  /** Patches per second at most, so a large cluster's API server is not flooded. */
  qps: number;
  /** Progress is logged at most this often. */
  progressEveryMs?: number;
}

/** Applies label work as merge patches, rate-limited, logging progress; one pass at a time. */
export class Labeller {
  private readonly api: KubernetesObjectApi;
  private running = false;

  constructor(private readonly options: LabellerOptions) {
    this.api = KubernetesObjectApi.makeApiClient(options.kc);
  }

  /** Runs a pass unless one is running (the caller triggers again on the next change). Returns whether it ran. */
  async run(work: readonly LabelTarget[], signal: AbortSignal): Promise<boolean> {
    if (this.running || work.length === 0) return false;
    this.running = true;
    const { logger, metrics } = this.options;
    const interval = 1000 / this.options.qps;
    const every = this.options.progressEveryMs ?? 2_000;
    let done = 0;
    let failed = 0;
    let lastLog = 0;
    try {
      if (work.length > 1) logger.info({ total: work.length }, 'labelling pass started');
      for (const target of work) {
        if (signal.aborted) break;
        const started = Date.now();
        metrics.labellingRemaining.set(work.length - done);
        try {
          await this.api.patch(
            {
              apiVersion: target.apiVersion,
              kind: target.kind,
              metadata: { name: target.name, ...(target.namespace ? { namespace: target.namespace } : {}), labels: target.labels },
            },
            undefined,
            undefined,
            'ctrlmesh-agent',
            undefined,
            PatchStrategy.MergePatch,
          );
          metrics.labelPatches.inc({ kind: target.kind });
        } catch (err) {
          // A deleted object needs no label; anything else is retried by the next pass.
          if (!isApiStatus(err, 404)) {
            failed += 1;
            logger.warn({ err: (err as Error).message, kind: target.kind, name: target.name, namespace: target.namespace }, 'could not label');
          }
        }
        done += 1;
        if (Date.now() - lastLog >= every && work.length > 1) {
          lastLog = Date.now();
          logger.info({ done, total: work.length }, 'labelling progress');
        }
        const wait = interval - (Date.now() - started);
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
      metrics.labellingRemaining.set(work.length - done);
      logger.info({ done, failed, total: work.length }, 'labelling pass finished');
    } finally {
      this.running = false;
    }
    return true;
  }
}
