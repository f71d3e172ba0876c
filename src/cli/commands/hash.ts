import { UsageError } from '../../errors.js';
import { bucketOf, createHashSettings, DEFAULT_BUCKET_COUNT, HASH_ALGORITHMS, type HashAlgorithm } from '../../sharding/index.js';
import { intValue, stringValue, type Command } from '../command.js';

export const hashCommand: Command = {
  name: 'hash',
  summary: 'Print the shard bucket of each namespace.',
  usage: '[--algorithm kusionstack|fnv|fnv-range] [--buckets N] NAMESPACE...',
  details: 'Prints NAMESPACE<TAB>BUCKET per line. kusionstack is bit-compatible with KusionStack ControllerMesh; fnv (32-bit FNV-1a) spreads names evenly; fnv-range (64-bit FNV-1a cut into equal ranges) is what an API server with shard selectors can filter by, and groups names that differ only at the end.',
  options: {
    algorithm: { type: 'string', valueName: 'NAME', description: `hash algorithm (${HASH_ALGORITHMS.join(', ')}; default fnv)` },
    buckets: { type: 'string', valueName: 'N', description: `number of buckets (default ${DEFAULT_BUCKET_COUNT})` },
  },
  run: async (ctx) => {
    const algorithm = stringValue(ctx, 'algorithm') ?? 'fnv';
    if (!(HASH_ALGORITHMS as readonly string[]).includes(algorithm)) {
      throw new UsageError(`--algorithm must be one of ${HASH_ALGORITHMS.join(', ')}, not "${algorithm}"`);
    }
    const bucketCount = intValue(ctx, 'buckets', DEFAULT_BUCKET_COUNT, { minimum: 1, maximum: 65536 });
    if (ctx.positionals.length === 0) throw new UsageError('name at least one namespace (see ctrlmesh hash --help)');
    const settings = createHashSettings({ algorithm: algorithm as HashAlgorithm, bucketCount });
    ctx.stdout.write(ctx.positionals.map((ns) => `${ns}\t${bucketOf(ns, settings)}\n`).join(''));
    return 0;
  },
};
