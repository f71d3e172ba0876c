import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  compileSelector,
  createHashSettings,
  ownedSelector,
  matches,
  mergeQuery,
  mergeSelectors,
  parseSelector,
  renderSelector,
  type Requirement,
} from '../../../src/sharding/index.js';
import { SelectorSyntaxError } from '../../../src/errors.js';

const keyArb = fc.constantFrom('app', 'tier', 'ctrlmesh.kusionstack.io/sharding-hash', 'env');
const valueArb = fc.constantFrom('a', 'b', 'c', '1', '2');
const labelsArb = fc.dictionary(keyArb, valueArb, { maxKeys: 4 });
const requirementArb: fc.Arbitrary<Requirement> = fc.oneof(
  fc.record({
    key: keyArb,
    operator: fc.constantFrom('In' as const, 'NotIn' as const),
    values: fc.uniqueArray(valueArb, { minLength: 1, maxLength: 3 }).map((v) => v.sort()),
  }),
  fc.record({ key: keyArb, operator: fc.constantFrom('Exists' as const, 'DoesNotExist' as const), values: fc.constant([]) }),
);
const selectorArb = fc.array(requirementArb, { maxLength: 4 });

describe('matches (Kubernetes semantics)', () => {
  it('empty selector matches everything', () => {
    expect(matches({}, {})).toBe(true);
    expect(matches({}, { a: 'b' })).toBe(true);
  });
  it('matchLabels and every operator', () => {
    const sel = {
      matchLabels: { app: 'foo' },
      matchExpressions: [
        { key: 'tier', operator: 'In' as const, values: ['a', 'b'] },
        { key: 'env', operator: 'NotIn' as const, values: ['prod'] },
        { key: 'owner', operator: 'Exists' as const },
        { key: 'legacy', operator: 'DoesNotExist' as const },
      ],
    };
    expect(matches(sel, { app: 'foo', tier: 'a', owner: 'x' })).toBe(true);
    expect(matches(sel, { app: 'foo', tier: 'a', owner: 'x', env: 'dev' })).toBe(true);
    expect(matches(sel, { app: 'foo', tier: 'a', owner: 'x', env: 'prod' })).toBe(false);
    expect(matches(sel, { app: 'bar', tier: 'a', owner: 'x' })).toBe(false);
    expect(matches(sel, { app: 'foo', tier: 'c', owner: 'x' })).toBe(false);
    expect(matches(sel, { app: 'foo', tier: 'a' })).toBe(false);
    expect(matches(sel, { app: 'foo', tier: 'a', owner: 'x', legacy: '' })).toBe(false);
  });
  it('NotIn matches objects lacking the key', () => {
    expect(matches({ matchExpressions: [{ key: 'k', operator: 'NotIn', values: ['z'] }] }, {})).toBe(true);
  });
});

describe('parseSelector / renderSelector', () => {
  it('parses every form the API server accepts', () => {
    const reqs = parseSelector('a=b, c==d,e!=f,k in (y, x),n notin (z),k2,!k3');
    expect(reqs).toEqual([
      { key: 'a', operator: 'In', values: ['b'] },
      { key: 'c', operator: 'In', values: ['d'] },
      { key: 'e', operator: 'NotIn', values: ['f'] },
      { key: 'k', operator: 'In', values: ['x', 'y'] },
      { key: 'n', operator: 'NotIn', values: ['z'] },
      { key: 'k2', operator: 'Exists', values: [] },
      { key: 'k3', operator: 'DoesNotExist', values: [] },
    ]);
    expect(renderSelector(reqs)).toBe('a=b,c=d,e notin (f),k in (x,y),n notin (z),k2,!k3');
  });
  it('parses empty and prefixed keys', () => {
    expect(parseSelector('')).toEqual([]);
    expect(parseSelector('  ')).toEqual([]);
    expect(parseSelector('ctrlmesh.kusionstack.io/sharding-hash in (1,2)')[0]?.key).toBe('ctrlmesh.kusionstack.io/sharding-hash');
    expect(parseSelector('a=')).toEqual([{ key: 'a', operator: 'In', values: [''] }]);
  });
  it.each([
    ['a in ()', 'must not be empty'],
    ['a in (b', 'expected "," or ")"'],
    ['a b', 'expected "="'],
    ['a>1', 'not supported'],
    [',a', 'expected a label key'],
    ['a=b c', 'expected ","'],
    ['-bad=1', 'label key'],
    ['a=-bad-', 'label value'],
  ])('refuses %j naming the problem', (text, reason) => {
    expect(() => parseSelector(text)).toThrow(SelectorSyntaxError);
    expect(() => parseSelector(text)).toThrow(reason);
  });
  it('render then parse gives the same selector (property)', () => {
    fc.assert(
      fc.property(selectorArb, labelsArb, (sel, labels) => {
        const back = parseSelector(renderSelector(sel));
        expect(matches(back, labels)).toBe(matches(sel, labels));
      }),
    );
  });
});

describe('mergeSelectors (AND)', () => {
  it('matches exactly what both inputs match (property)', () => {
    fc.assert(
      fc.property(selectorArb, selectorArb, labelsArb, (a, b, labels) => {
        const merged = mergeSelectors(a, b);
        expect(matches(merged.requirements, labels)).toBe(matches(a, labels) && matches(b, labels));
        if (merged.matchesNothing) expect(matches(merged.requirements, labels)).toBe(false);
        // The rendered form parses back to the same meaning, so the API server sees what we mean.
        expect(matches(parseSelector(renderSelector(merged.requirements)), labels)).toBe(matches(merged.requirements, labels));
      }),
    );
  });
  it('an In/In conflict matches nothing and still renders as an accepted selector', () => {
    const merged = mergeQuery(parseSelector('h in (1,2)'), 'h in (3)');
    expect(merged).toEqual({ query: 'h,!h', matchesNothing: true });
    expect(parseSelector(merged.query)).toHaveLength(2);
  });
  it('intersects In sets and drops subsumed NotIn', () => {
    const shard = compileSelector({ matchExpressions: [{ key: 'h', operator: 'In', values: ['1', '2', '3'] }] });
    expect(mergeQuery(shard, 'h in (2,3,4),h!=3,app=x').query).toBe('app=x,h=2');
    expect(mergeQuery(shard, undefined).query).toBe('h in (1,2,3)');
    expect(mergeQuery([], 'k,k notin (a)').query).toBe('k,k notin (a)');
  });
});

describe('ownedSelector', () => {
  const settings = createHashSettings();
  it('is the buckets AND the limit', () => {
    const owned = ownedSelector({ buckets: [3, 1], limit: { matchLabels: { app: 'foo' } }, settings });
    expect(renderSelector(owned.requirements)).toBe('app=foo,ctrlmesh.kusionstack.io/sharding-hash in (1,3)');
    expect(mergeQuery(owned.requirements, 'ctrlmesh.kusionstack.io/sharding-hash=2').matchesNothing).toBe(true);
  });
  it('matches nothing without buckets, in a form the API server accepts', () => {
    const owned = ownedSelector({ buckets: [], settings });
    expect(owned.matchesNothing).toBe(true);
    expect(renderSelector(owned.requirements)).toBe('ctrlmesh.kusionstack.io/sharding-hash,!ctrlmesh.kusionstack.io/sharding-hash');
  });
});
