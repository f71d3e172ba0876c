import { bucketOf, createHashSettings, HASH_ALGORITHMS } from '../src/sharding/index.js';
import { round, seededRandom, timePerOp, type Benchmark } from './harness.js';

const WORDS = (
  'alpha atlas aurora beacon billing birch cargo cedar checkout comet compass coral crane data delta ember falcon ' +
  'fern forge galaxy garnet harbor hawk helix iris jade juniper kepler lagoon lambda lotus maple marble meadow ' +
  'mercury meteor nebula nimbus oak onyx orbit orchid payments pebble phoenix pine pixel prism quartz raven ' +
  'ridge river ruby saffron search sierra silver solar spruce storm summit tango thunder tide topaz trident ' +
  'tundra umber vector velvet violet vortex walnut willow zephyr zinc identity ledger gateway inventory'
).split(' ');
const ENVS = ['dev', 'staging', 'prod', 'qa', 'test', 'perf'];
const NAMES = 10_000;
const BUCKETS = 32;

/** 10,000 distinct names like team-falcon3-prod, from a seeded PRNG. */
function namespaces(random: () => number): string[] {
  const names = new Set<string>();
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)] as T;
  while (names.size < NAMES) {
    const suffix = random() < 0.5 ? '' : String(Math.floor(random() * 100));
    names.add(`team-${pick(WORDS)}${suffix}-${pick(ENVS)}`);
  }
  return [...names];
}

const benchmark: Benchmark = {
  name: 'hash-spread',
  description: `spread of ${NAMES} realistic namespace names over ${BUCKETS} buckets, per hash algorithm`,
  run: ({ progress }) => {
    const names = namespaces(seededRandom(7));
    return HASH_ALGORITHMS.map((algorithm) => {
      progress(algorithm);
      const settings = createHashSettings({ algorithm, bucketCount: BUCKETS });
      const counts = new Array<number>(BUCKETS).fill(0);
      for (const name of names) counts[bucketOf(name, settings)]! += 1;
      const mean = NAMES / BUCKETS;
      const sd = Math.sqrt(counts.reduce((a, c) => a + (c - mean) ** 2, 0) / BUCKETS);
      let i = 0;
      const timing = timePerOp(() => bucketOf(names[i++ % NAMES] as string, settings), 200);
      return {
        case: algorithm,
        maxOverMean: round(Math.max(...counts) / mean, 3),
        minOverMean: round(Math.min(...counts) / mean, 3),
        stddevOverMean: round(sd / mean, 3),
        nsPerHash: timing.nsPerOp,
      };
    });
  },
};

export default benchmark;
