import { describe, expect, it } from 'vitest';
import { labelsAfter } from '../../../src/proxy/request/judgement/labels-after.js';

const H = 'ctrlmesh.kusionstack.io/shard-hash';
const now = { [H]: '8', app: 'a' };
const merge = (patch: unknown): ReturnType<typeof labelsAfter> => labelsAfter('patch', 'application/merge-patch+json', JSON.stringify(patch), now);
const json = (ops: unknown): ReturnType<typeof labelsAfter> => labelsAfter('patch', 'application/json-patch+json', JSON.stringify(ops), now);

describe('labelsAfter: where a write leaves an object labelled with its bucket', () => {
  it('an update carries all the labels it leaves', () => {
    expect(labelsAfter('update', 'application/json', JSON.stringify({ metadata: { labels: { [H]: '9' } } }), now)).toEqual({ [H]: '9' });
    expect(labelsAfter('update', 'application/json', JSON.stringify({ metadata: { name: 'w' } }), now)).toEqual({});
    expect(labelsAfter('update', 'application/json', JSON.stringify({ spec: {} }), now)).toEqual({});
    expect(labelsAfter('update', 'application/json', JSON.stringify({ metadata: { labels: { [H]: 9 } } }), now)).toBeUndefined();
    expect(labelsAfter('update', 'application/json', 'not json', now)).toBeUndefined();
  });

  it('a merge patch merges, null removes, absence keeps; the last of duplicate keys counts', () => {
    expect(merge({ spec: { v: 1 } })).toEqual(now);
    expect(merge({ metadata: { annotations: { x: 'y' } } })).toEqual(now);
    expect(merge({ metadata: { labels: { [H]: '11' } } })).toEqual({ [H]: '11', app: 'a' });
    expect(merge({ metadata: { labels: { [H]: null } } })).toEqual({ app: 'a' });
    expect(merge({ metadata: { labels: null } })).toEqual({});
    expect(merge({ metadata: null })).toEqual({});
    expect(merge({ metadata: { labels: { [H]: 11 } } })).toBeUndefined();
    expect(labelsAfter('patch', 'application/merge-patch+json', `{"metadata":{"labels":{"${H}":"8"}},"metadata":{"labels":{"${H}":"11"}}}`, now)).toEqual({ [H]: '11', app: 'a' });
  });

  it('a JSON patch is followed op by op on the labels, and refused where it moves, copies or replaces what holds them', () => {
    expect(json([{ op: 'replace', path: '/spec/v', value: 1 }])).toEqual(now);
    expect(json([{ op: 'replace', path: `/metadata/labels/${H.replace('/', '~1')}`, value: '11' }])).toEqual({ [H]: '11', app: 'a' });
    expect(json([{ op: 'remove', path: `/metadata/labels/${H.replace('/', '~1')}` }])).toEqual({ app: 'a' });
    expect(json([{ op: 'remove', path: '/metadata/labels' }])).toEqual({});
    expect(json([{ op: 'add', path: '/metadata/labels', value: { [H]: '3' } }])).toEqual({ [H]: '3' });
    expect(json([{ op: 'test', path: '/metadata/labels', value: {} }])).toEqual(now);
    for (const op of [
      { op: 'replace', path: '/metadata', value: { labels: { [H]: '3' } } },
      { op: 'replace', path: '', value: {} },
      { op: 'move', from: '/metadata/labels', path: '/spec/x' },
      { op: 'copy', from: '/spec/labels', path: '/metadata/labels' },
      { op: 'add', path: '/metadata/labels/a/b', value: 'x' },
      { op: 'add', path: `/metadata/labels/${H.replace('/', '~1')}`, value: 3 },
    ]) {
      expect(json([op]), JSON.stringify(op)).toBeUndefined();
    }
  });

  it('any other patch type is not followed', () => {
    expect(labelsAfter('patch', 'application/apply-patch+yaml', 'metadata: {}', now)).toBeUndefined();
  });
});
