/**
 * The version of a shard's next route table (pure): one above the previous and at least the hub's clock in
 * milliseconds. Versions are then monotonic across hub restarts, failovers and the loss of the routes bucket (a hub
 * that starts with nothing read back still publishes above every version it or another hub published before,
 * as long as the clocks that published them were not ahead of its own), and proxies, which apply only greater
 * versions, are never pinned to an old table.
 */
export function nextTableVersion(previous: number | undefined, now: number): number {
  return Math.max((previous ?? 0) + 1, Math.floor(now));
}
