#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { CoreV1Api, KubeConfig, makeInformer, type V1ConfigMap } from '@kubernetes/client-node';
import { reconcile } from './reconciler.js';

/**
 * A small real operator for the demo and the tests: an informer on ConfigMaps labelled app=demo (all
 * namespaces) and a reconcile loop that annotates each with its shard, printing `reconciled ns/name shard=X`.
 * Run it behind a ctrlmesh proxy with the kubeconfig `ctrlmesh kubeconfig` writes.
 */
const { values } = parseArgs({
  options: {
    kubeconfig: { type: 'string' },
    context: { type: 'string' },
    shard: { type: 'string' },
    selector: { type: 'string', default: 'app=demo' },
  },
});
if (!values.kubeconfig || !values.shard) {
  process.stderr.write('usage: sample-operator --kubeconfig FILE --shard NAME [--context NAME] [--selector app=demo]\n');
  process.exit(2);
}
const shard = values.shard;
const selector = values.selector ?? 'app=demo';
const kc = new KubeConfig();
kc.loadFromFile(values.kubeconfig);
if (values.context) kc.setCurrentContext(values.context);
const api = kc.makeApiClient(CoreV1Api);
const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

const informer = makeInformer<V1ConfigMap>(kc, '/api/v1/configmaps', () => api.listConfigMapForAllNamespaces({ labelSelector: selector }), selector);
const handle = (configMap: V1ConfigMap): void => {
  reconcile({ api, configMap, shard, out }).catch((err: unknown) => {
    process.stderr.write(`reconcile ${configMap.metadata?.namespace}/${configMap.metadata?.name} failed: ${(err as Error).message}\n`);
  });
};
informer.on('add', handle);
informer.on('update', handle);
// client-node's informer re-lists on 410 by itself; after other errors it must be started again.
informer.on('error', (err: unknown) => {
  process.stderr.write(`informer error: ${(err as Error)?.message ?? String(err)}; restarting in 1s\n`);
  setTimeout(() => void informer.start().catch(() => undefined), 1000);
});
await informer.start();
out(`started shard=${shard}`);
const stop = (): void => {
  void informer.stop();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
