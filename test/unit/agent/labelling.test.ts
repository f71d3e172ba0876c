import { describe, expect, it } from 'vitest';
import { admit } from '../../../src/agent/admission.js';
import { labelWork } from '../../../src/agent/labeller.js';
import { meshLabels, missingLabels } from '../../../src/agent/labels.js';
import type { LabelScope } from '../../../src/agent/related.js';
import { createHashSettings } from '../../../src/sharding/index.js';

const settings = createHashSettings({ algorithm: 'kusionstack' });
const HASH = settings.labels.hash;
const skip = new Set(['kube-system', 'kube-public', 'default']);

describe('mesh labels', () => {
  it("are the namespace's bucket, its name and control=true", () => {
    expect(meshLabels('ns-a', settings)).toEqual({ [HASH]: '15', [settings.labels.namespace]: 'ns-a', [settings.labels.control]: 'true' });
    expect(meshLabels('ns-b', settings)[HASH]).toBe('16');
  });

  it('lists only what is missing or wrong', () => {
    const wanted = meshLabels('ns-a', settings);
    expect(missingLabels(wanted, wanted)).toBeUndefined();
    expect(missingLabels({ ...wanted, [HASH]: '3', other: 'x' }, wanted)).toEqual({ [HASH]: '15' });
  });
});

describe('labelWork', () => {
  it('skips system namespaces and what is already labelled, so an interrupted pass resumes', () => {
    const done = { metadata: { name: 'ns-a', labels: meshLabels('ns-a', settings) } };
    const work = labelWork({
      namespaces: [done, { metadata: { name: 'ns-b' } }, { metadata: { name: 'kube-system' } }],
      related: [
        {
          group: '',
          resource: 'configmaps',
          apiVersion: 'v1',
          kind: 'ConfigMap',
          objects: [
            { metadata: { name: 'x', namespace: 'ns-a', labels: meshLabels('ns-a', settings) } },
            { metadata: { name: 'y', namespace: 'ns-a' } },
            { metadata: { name: 'z', namespace: 'default' } },
          ],
        },
      ],
      settings,
      skip,
      scope: { namespaces: true, resources: [{ group: '', resource: 'configmaps' }] },
    });
    expect(work.map((w) => `${w.kind}/${w.namespace ?? ''}/${w.name}`)).toEqual(['Namespace//ns-b', 'ConfigMap/ns-a/y']);
    expect(work[1]?.labels[HASH]).toBe('15');
  });

  it('lists only what the scope labels: namespaces when it says so, objects of its resources (a `*` group naming any)', () => {
    const related = [
      { group: '', resource: 'configmaps', apiVersion: 'v1', kind: 'ConfigMap', objects: [{ metadata: { name: 'c', namespace: 'ns-a' } }] },
      { group: 'apps', resource: 'deployments', apiVersion: 'apps/v1', kind: 'Deployment', objects: [{ metadata: { name: 'd', namespace: 'ns-a' } }] },
    ];
    const work = (scope: LabelScope): string[] =>
      labelWork({ namespaces: [{ metadata: { name: 'ns-a' } }], related, settings, skip, scope }).map((w) => `${w.kind}/${w.name}`);
    expect(work({ namespaces: true, resources: [{ group: '', resource: 'configmaps' }] })).toEqual(['Namespace/ns-a', 'ConfigMap/c']);
    expect(work({ namespaces: false, resources: [{ group: '*', resource: 'deployments' }] })).toEqual(['Deployment/d']);
    expect(work({ namespaces: false, resources: [] })).toEqual([]);
  });
});

describe('admit', () => {
  const decode = (patch: string | undefined): unknown => JSON.parse(Buffer.from(patch ?? '', 'base64').toString());

  it("labels a new namespace with its own bucket and an object with its namespace's", () => {
    const ns = admit({ uid: '1', kind: { group: '', version: 'v1', kind: 'Namespace' }, object: { metadata: { name: 'ns-b' } } }, settings, skip);
    expect(ns.patchType).toBe('JSONPatch');
    expect(decode(ns.patch)).toEqual([{ op: 'add', path: '/metadata/labels', value: meshLabels('ns-b', settings) }]);

    const cm = admit(
      { uid: '2', kind: { group: '', version: 'v1', kind: 'ConfigMap' }, namespace: 'ns-a', object: { metadata: { name: 'c', labels: { app: 'x' } } } },
      settings,
      skip,
    );
    expect(decode(cm.patch)).toContainEqual({ op: 'add', path: '/metadata/labels/ctrlmesh.kusionstack.io~1sharding-hash', value: '15' });
  });

  it('allows without a patch what is skipped or already labelled', () => {
    expect(admit({ uid: '3', kind: { group: '', version: 'v1', kind: 'ConfigMap' }, namespace: 'kube-system', object: {} }, settings, skip)).toEqual({
      uid: '3',
      allowed: true,
    });
    const labelled = { metadata: { name: 'c', labels: meshLabels('ns-a', settings) } };
    expect(admit({ uid: '4', kind: { group: '', version: 'v1', kind: 'ConfigMap' }, namespace: 'ns-a', object: labelled }, settings, skip).patch).toBeUndefined();
  });
});
