import { randomBytes } from 'node:crypto';
import { ContinueTokens } from '../../../src/proxy/routes/continue-tokens.js';
import type { ClusterRoute, RouteTable } from '../../../src/transport/index.js';

/** Shaped like a PEM certificate: the proxy refuses a cluster without one (unit tests never dial it). */
export const FAKE_CA_PEM = '-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n';

/** A valid route table for one shard of `op/demo`, home cluster `a`; tests override what they are about. */
export function routeTableFixture(overrides: Partial<RouteTable> = {}): RouteTable {
  return {
    schema: 1,
    operator: 'op/demo',
    shard: 's1',
    version: 1,
    issuedAt: '2026-11-21T00:00:00Z',
    homeCluster: 'a',
    hashAlgorithm: 'kusionstack',
    bucketCount: 32,
    labels: { hash: 'h', namespace: 'n', control: 'c' },
    leaseSeconds: 30,
    clusters: [clusterFixture('a', [])],
    ...overrides,
  };
}

export function clusterFixture(name: string, buckets: number[], overrides: Partial<ClusterRoute> = {}): ClusterRoute {
  return { name, server: `https://${name}.example:6443`, caPem: FAKE_CA_PEM, buckets, limits: [], ...overrides };
}

/** A continue-token sealer with a fixed key: unit tests of route states and lists. */
export const continueTokensFixture = new ContinueTokens({ key: Buffer.alloc(32, 7), randomBytes });

/** A sealer that marks what it seals, for list-filter tests. */
export const markContinue = (token: string): string => `sealed(${token})`;
