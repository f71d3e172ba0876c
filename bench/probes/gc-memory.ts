/**
 * Preloaded into the ctrlmesh proxy by bench/proxy.ts (`node --expose-gc --import <this>`): on SIGUSR2 it forces a
 * full garbage collection and prints the process's memory as one JSON line, so memory per watch is read after GC
 * rather than with whatever garbage the last requests left.
 */
const collect = (globalThis as { gc?: () => void }).gc;

process.on('SIGUSR2', () => {
  collect?.();
  collect?.();
  const { rss, heapUsed } = process.memoryUsage();
  process.stdout.write(`gc-memory ${JSON.stringify({ rss, heap: heapUsed, forced: collect !== undefined })}\n`);
});
