import { compileSelector, matches, mergeQuery, parseSelector } from '../src/sharding/index.js';
import { timePerOp, type Benchmark } from './harness.js';

const HASH_KEY = 'ctrlmesh.kusionstack.io/sharding-hash';
/** A shard owning half the buckets, and the kind of selector a controller's informer sends. */
const shard = compileSelector({
  matchExpressions: [
    { key: HASH_KEY, operator: 'In', values: Array.from({ length: 16 }, (_, i) => String(i * 2)) },
    { key: 'ctrlmesh.kusionstack.io/control', operator: 'In', values: ['true'] },
  ],
});
const clientQuery = 'app.kubernetes.io/name=demo,tier in (web,api),!legacy';
const labels = { 'app.kubernetes.io/name': 'demo', tier: 'web', [HASH_KEY]: '14', 'ctrlmesh.kusionstack.io/control': 'true', team: 'a', env: 'prod' };

// Each case adds to it so the work cannot be optimised away.
let sink = 0;

const benchmark: Benchmark = {
  name: 'selector',
  description: "the proxy's hot path: the shard's selector AND the client's labelSelector, parsed, merged and rendered",
  run: ({ progress }) => {
    const cases: [string, () => void][] = [
      ['parse+merge+render (client selector)', () => (sink += mergeQuery(shard, clientQuery).query.length)],
      ['merge+render (no client selector)', () => (sink += mergeQuery(shard, undefined).query.length)],
      ['parse only', () => (sink += parseSelector(clientQuery).length)],
      ['matches (6 labels)', () => (sink += matches(shard, labels) ? 1 : 0)],
    ];
    return cases.map(([name, fn]) => {
      progress(name);
      return { case: name, ...timePerOp(fn) };
    });
  },
};

export default benchmark;
