/** The proxy's side of each cluster's API server: connections, HTTP/2 watch streams, breakers, per-cluster metrics. */
export { type BreakerOptions, type Forward } from './cluster-breaker.js';
export { ClusterLinks, type ClusterLink } from './cluster-links.js';
export { type ClusterMetrics } from './cluster-metrics.js';
export { loadCredentials } from './credentials.js';
export { type Http2WatchPool } from './http2-watches.js';
export { type ClusterCredentials, type ClusterUpstream } from './upstream.js';
