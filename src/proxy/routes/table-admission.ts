import { endpointProblem, type RouteTable } from '../../transport/index.js';

/**
 * How far past the proxy's own clock a table's version may be. The hub issues versions from its clock in
 * milliseconds (docs/control-plane.md, "Planning and route tables"), so a genuine table is never much ahead of
 * the proxy's clock; one far ahead (up to 2^53-1) would make every later genuine table look old and pin the
 * proxy to it.
 */
export const MAX_VERSION_AHEAD_MS = 24 * 60 * 60 * 1000;

/**
 * Why a table must not be applied, whatever its source (signed NATS table, file, stored copy): a cluster reached
 * over plain http or without a CA would get the proxy's credentials in clear or unverified, and a version from
 * the future (above `now` + one day, `now` the proxy's clock in ms) would pin the proxy.
 */
export function tableRefusal(table: RouteTable, now: number): string | undefined {
  for (const cluster of table.clusters) {
    const problem = endpointProblem(cluster);
    if (problem) return `cluster ${cluster.name}: ${problem}`;
  }
  if (table.version > now + MAX_VERSION_AHEAD_MS) {
    return `version ${table.version} is more than a day ahead of this proxy's clock (${Math.floor(now)} ms): it would pin the proxy`;
  }
  return undefined;
}
