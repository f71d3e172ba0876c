import type { RouteTable } from '../transport/index.js';

/**
 * How far past the applied version a table may jump. The hub counts versions one by one, so a proxy that missed
 * changes while disconnected sees a small step; a huge one (up to 2^53-1) would make every later genuine table
 * look old and pin the proxy to this one.
 */
export const MAX_VERSION_STEP = 1_000_000;

/**
 * Why a table must not be applied, whatever its source (signed NATS table, file, stored copy): a cluster reached
 * over plain http or without a CA would get the proxy's credentials in clear or unverified.
 */
export function tableRefusal(table: RouteTable, applied: RouteTable | undefined): string | undefined {
  for (const cluster of table.clusters) {
    let url: URL;
    try {
      url = new URL(cluster.server);
    } catch {
      return `cluster ${cluster.name}: server "${cluster.server}" is not a URL`;
    }
    if (url.protocol !== 'https:') return `cluster ${cluster.name}: server ${cluster.server} is not https (credentials would travel in clear)`;
    if (!cluster.caPem.includes('-----BEGIN CERTIFICATE-----')) return `cluster ${cluster.name}: no CA certificate to verify ${cluster.server} with`;
  }
  if (applied && table.version > applied.version + MAX_VERSION_STEP) {
    return `version ${table.version} jumps more than ${MAX_VERSION_STEP} past the applied ${applied.version}`;
  }
  return undefined;
}
