import { makeInformer, type KubeConfig, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { isApiStatus } from './api-status.js';

export interface WatchedCollection<T extends KubernetesObject> {
  /** The objects as last seen (empty before the first list). */
  list(): readonly T[];
  /** Whether the informer has listed and is watching. */
  synced(): boolean;
  /** Whether the last attempt was refused by RBAC (403): retried, but not the API server's trouble. */
  forbidden(): boolean;
  stop(): Promise<void>;
}

export interface WatchCollectionOptions<T extends KubernetesObject> {
  kc: KubeConfig;
  /** The watch path, e.g. /api/v1/namespaces. */
  path: string;
  list: () => Promise<KubernetesListObject<T>>;
  /** Shown in logs. */
  name: string;
  logger: Logger;
  /** Called after every add, update or delete, and after each (re)list; an update passes the object as it now is. */
  onChange: (updated?: T) => void;
  /** Called when the informer loses or regains its API server. */
  onSyncChange?: (synced: boolean) => void;
  retryMs?: number;
}

/**
 * A client-node informer that survives API server trouble: client-node re-lists by itself after a 410, but after
 * any other error the informer stops, so it is started again here after a pause (and re-lists, resynchronising).
 */
export function watchCollection<T extends KubernetesObject>(options: WatchCollectionOptions<T>): WatchedCollection<T> {
  const { logger } = options;
  const informer = makeInformer<T>(options.kc, options.path, options.list);
  let synced = false;
  let forbidden = false;
  let stopped = false;
  let retry: NodeJS.Timeout | undefined;
  const setSynced = (next: boolean): void => {
    if (next === synced) return;
    synced = next;
    if (next) forbidden = false;
    // Deferred: client-node may report from inside start(), before the caller holds this collection.
    queueMicrotask(() => options.onSyncChange?.(next));
  };
  const start = (): void => {
    informer.start().then(
      () => {
        setSynced(true);
        options.onChange();
      },
      (err: unknown) => failed(err),
    );
  };
  const failed = (err: unknown): void => {
    if (stopped) return;
    forbidden = isApiStatus(err, 403);
    setSynced(false);
    logger.warn(
      { err: err instanceof Error ? err.message : err, informer: options.name },
      forbidden ? 'listing forbidden by RBAC (grant list and watch to the agent); retrying' : 'watch failed; listing again shortly',
    );
    clearTimeout(retry);
    retry = setTimeout(start, options.retryMs ?? 1_000);
  };
  informer.on('add', () => options.onChange());
  informer.on('update', (obj) => options.onChange(obj));
  informer.on('delete', () => options.onChange());
  informer.on('connect', () => setSynced(true));
  informer.on('error', failed);
  start();
  return {
    list: () => informer.list(),
    synced: () => synced,
    forbidden: () => forbidden,
    async stop() {
      stopped = true;
      clearTimeout(retry);
      await informer.stop();
    },
  };
}
