import type { Logger } from 'pino';
import type { ProxyMetrics } from '../../metrics/index.js';
import type { ClusterRoute } from '../../transport/index.js';
import type CircuitBreaker from 'opossum';
import { createClusterBreaker, type BreakerOptions, type Forward } from './cluster-breaker.js';
import { ClusterMetrics } from './cluster-metrics.js';
import { ClusterDispatcher, ClusterUpstream, type ClusterCredentials, type UpstreamOptions } from './upstream.js';

/** A cluster's connection and breaker, kept across route tables while the cluster's address is unchanged. */
export interface ClusterLink {
  upstream: ClusterUpstream;
  breaker: CircuitBreaker<[Forward], void>;
  metrics: ClusterMetrics;
}

/**
 * Per-cluster connection pools and breakers, kept while a cluster's address, CA and credentials stay the
 * same (a new route table that only moves buckets keeps connections and breaker state).
 */
export class ClusterLinks {
  readonly dispatcher = new ClusterDispatcher();
  private readonly links = new Map<string, ClusterLink>();
  private readonly options: {
    credentials: ReadonlyMap<string, ClusterCredentials>;
    upstream: UpstreamOptions;
    breaker: BreakerOptions;
    metrics: ProxyMetrics;
    logger: Logger;
  };

  constructor(options: ClusterLinks['options']) {
    this.options = options;
  }

  link(route: ClusterRoute): ClusterLink {
    const { credentials, upstream, breaker, metrics, logger } = this.options;
    const existing = this.links.get(route.name);
    if (existing?.upstream.fingerprint === ClusterUpstream.fingerprint(route, credentials.get(route.name), upstream)) return existing;
    if (existing) this.release(existing);
    if (!credentials.has(route.name)) logger.warn({ cluster: route.name }, 'no credentials for this cluster: requests go unauthenticated');
    const link = {
      upstream: new ClusterUpstream(route, credentials.get(route.name), upstream, logger),
      breaker: createClusterBreaker({ cluster: route.name, settings: breaker, gauge: metrics.breakerState, logger }),
      metrics: new ClusterMetrics(metrics, route.name),
    };
    this.links.set(route.name, link);
    return link;
  }

  /** Keeps the links of `inUse` clusters, closes the others, and points the dispatcher at the kept ones. */
  retain(inUse: ReadonlySet<string>): void {
    for (const [name, link] of this.links) {
      if (inUse.has(name)) continue;
      this.links.delete(name);
      this.release(link);
    }
    this.dispatcher.setUpstreams([...this.links.values()].map((l) => l.upstream));
  }

  /** Shutdown: breakers stopped, every connection destroyed (watches included). */
  async close(): Promise<void> {
    const links = [...this.links.values()];
    this.links.clear();
    for (const link of links) {
      link.breaker.shutdown();
      this.options.metrics.breakerState.remove({ cluster: link.upstream.name });
    }
    await Promise.all(links.map((link) => link.upstream.destroy()));
  }

  private release(link: ClusterLink): void {
    link.breaker.shutdown();
    this.options.metrics.breakerState.remove({ cluster: link.upstream.name });
    // close() lets requests in flight finish; open watches on a removed cluster are ended by the registry.
    void link.upstream.close();
  }
}
