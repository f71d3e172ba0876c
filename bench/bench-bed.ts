import type { ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import type { Pool } from 'undici';
import type { ApiServerHandle, EtcdHandle } from '../src/dev/index.js';
import type { ClusterRoute, RouteTable } from '../src/transport/index.js';

/** What a proxy benchmark starts: closed and removed together, whatever got started before a failure. */
export interface BenchBed {
  dir: string;
  pools: Pool[];
  children: ChildProcess[];
  etcd?: EtcdHandle;
  server?: ApiServerHandle;
}

export async function stopBenchBed(bed: BenchBed): Promise<void> {
  await Promise.all(bed.pools.map((p) => p.close()));
  for (const child of bed.children) child.kill('SIGTERM');
  await bed.server?.stop();
  await bed.etcd?.stop();
  await rm(bed.dir, { recursive: true, force: true });
}

/** The one shard's route table a benchmarked proxy serves: one cluster, the bench's server, its labels. */
export function benchRouteTable(
  server: ApiServerHandle,
  options: { hashAlgorithm: RouteTable['hashAlgorithm']; hashLabel: string; route: Pick<ClusterRoute, 'buckets'> & Partial<ClusterRoute> },
): RouteTable {
  return {
    schema: 1,
    operator: 'bench/bench',
    shard: 'bench-0',
    version: 1,
    issuedAt: new Date().toISOString(),
    homeCluster: server.name,
    hashAlgorithm: options.hashAlgorithm,
    bucketCount: 32,
    labels: { hash: options.hashLabel, namespace: 'ctrlmesh.kusionstack.io/namespace', control: 'ctrlmesh.kusionstack.io/control' },
    leaseSeconds: 30,
    clusters: [{ name: server.name, server: server.server, caPem: server.caPem, limits: [], ...options.route }],
  };
}
