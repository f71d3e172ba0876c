export { isApiStatus } from './api-status.js';
export { ensureNamespace } from './namespaces.js';
export { clusterEndpoint, inClusterKubeConfig, loadKubeConfig } from './kubeconfig.js';
export { watchCollection, type WatchedCollection } from './informer.js';
export { resolveResources, type ResolvedResource } from './resources.js';
