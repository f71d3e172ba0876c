import { MESSAGE_SCHEMA_VERSION, type ClusterReport, type ReportedObject } from '../../../src/transport/index.js';

/** The hash settings every test report carries unless it says otherwise. */
export const HASH = {
  algorithm: 'fnv-range' as const,
  bucketCount: 32,
  labels: { hash: 'ctrlmesh.kusionstack.io/sharding-hash', namespace: 'ctrlmesh.kusionstack.io/namespace', control: 'ctrlmesh.kusionstack.io/control' },
};

/** A cluster's report of these ShardingConfigs and nothing else, unless `extra` says more. */
export function clusterReport(cluster: string, configs: ReportedObject[], extra: Partial<ClusterReport> = {}): ClusterReport {
  return {
    schema: MESSAGE_SCHEMA_VERSION,
    cluster,
    sentAt: '2026-01-01T00:00:00.000Z',
    hash: HASH,
    shardingConfigs: configs,
    circuitBreakers: [],
    faultInjections: [],
    pods: [],
    namespaces: [],
    objectCounts: [],
    ...extra,
  };
}
