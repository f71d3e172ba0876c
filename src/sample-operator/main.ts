#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { CoreV1Api, KubeConfig, makeInformer, type Informer, type ObjectCache, type V1ConfigMap } from '@kubernetes/client-node';
import { desiredPatch, reconcile } from './reconciler.js';
import { startSampleWebhook } from './webhook.js';

/**
 * A small real operator for the demo and the tests: an informer on ConfigMaps labelled app=demo (all
 * namespaces) and a reconcile loop that annotates each with its shard, printing `reconciled ns/name shard=X`
 * (with `cluster=<context>` when it watches several). Run it behind a ctrlmesh proxy with the kubeconfig
 * `ctrlmesh kubeconfig` writes: the current context only, or every context given in --contexts (multicluster).
 * With --timestamps each line also says (before `cluster=`) when the reconcile started and finished (ms since the epoch) and whether it
 * had to write, so a test can lay every shard's reconciles of an object on one time line.
 * A failed reconcile is tried again (after 1 s, doubling up to 16 s) while that version of the object is in the cache.
 * With --webhook-port (and --cert-dir holding tls.crt and tls.key) it also serves a validating webhook that reads
 * its own informer cache of the first context: a ConfigMap may not reuse the `data.key` of another in its namespace
 * (src/sample-operator/webhook.ts), each review reported as `admission ns/name shard=X allowed=true|false`.
 */
const { values } = parseArgs({
  options: {
    kubeconfig: { type: 'string' },
    contexts: { type: 'string' },
    shard: { type: 'string' },
    selector: { type: 'string', default: 'app=demo' },
    timestamps: { type: 'boolean', default: false },
    'webhook-port': { type: 'string' },
    'cert-dir': { type: 'string' },
  },
});
const webhookPort = values['webhook-port'] === undefined ? undefined : Number(values['webhook-port']);
if (!values.kubeconfig || !values.shard || (webhookPort !== undefined && (!Number.isInteger(webhookPort) || !values['cert-dir']))) {
  process.stderr.write(
    'usage: sample-operator --kubeconfig FILE --shard NAME [--contexts A,B] [--selector app=demo] [--timestamps] [--webhook-port PORT --cert-dir DIR]\n',
  );
  process.exit(2);
}
const shard = values.shard;
const kubeconfigPath = values.kubeconfig;
const selector = values.selector ?? 'app=demo';
const base = new KubeConfig();
base.loadFromFile(kubeconfigPath);
const contexts = values.contexts ? values.contexts.split(',') : [base.getCurrentContext()];
// Stopping aborts the informers' requests, which they report as errors: not worth a line or a restart.
let stopping = false;
const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

/** One informer and reconcile loop per cluster (context) the operator works on. */
async function run(context: string): Promise<Informer<V1ConfigMap> & ObjectCache<V1ConfigMap>> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  kc.setCurrentContext(context);
  const api = kc.makeApiClient(CoreV1Api);
  const suffix = contexts.length > 1 ? ` cluster=${context}` : '';
  const report = (line: string): void => out(`${line}${suffix}`);
  const informer = makeInformer<V1ConfigMap>(kc, '/api/v1/configmaps', () => api.listConfigMapForAllNamespaces({ labelSelector: selector }), selector);
  const attempt = (configMap: V1ConfigMap, failures: number): void => {
    const started = Date.now();
    const wrote = desiredPatch(configMap, shard) !== undefined;
    const timed = (line: string): void => report(`${line} started=${started} finished=${Date.now()} wrote=${wrote}`);
    reconcile({ api, configMap, shard, out: values.timestamps ? timed : report }).catch((err: unknown) => {
      const { namespace, name, resourceVersion } = configMap.metadata ?? {};
      process.stderr.write(`reconcile ${namespace}/${name}${suffix} failed: ${(err as Error).message}\n`);
      // Requeued as a controller does, later each time, while this version is still the one in the cache (a newer
      // one is reconciled by its own event; a deleted or revoked one is gone from the cache).
      setTimeout(() => {
        const current = informer.get(name ?? '', namespace);
        if (!stopping && current && current.metadata?.resourceVersion === resourceVersion) attempt(current, failures + 1);
      }, Math.min(1000 * 2 ** failures, 16_000)).unref();
    });
  };
  const handle = (configMap: V1ConfigMap): void => attempt(configMap, 0);
  informer.on('add', handle);
  informer.on('update', handle);
  // client-node's informer re-lists on 410 by itself; after other errors it must be started again.
  informer.on('error', (err: unknown) => {
    if (stopping) return;
    process.stderr.write(`informer error${suffix}: ${(err as Error)?.message ?? String(err)}; restarting in 1s\n`);
    setTimeout(() => void informer.start().catch(() => undefined), 1000);
  });
  await informer.start();
  return informer;
}

const informers = await Promise.all(contexts.map(run));
const webhook =
  webhookPort === undefined
    ? undefined
    : startSampleWebhook({ port: webhookPort, certDir: values['cert-dir'] as string, shard, cache: (namespace) => informers[0]?.list(namespace) ?? [], out });
out(`started shard=${shard}`);
const stop = (): void => {
  stopping = true;
  webhook?.close();
  for (const informer of informers) void informer.stop();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
