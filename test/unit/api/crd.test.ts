import { describe, expect, it } from 'vitest';
import { buildCrds, type StructuralSchema } from '../../../src/api/index.js';

function walk(node: StructuralSchema, path: string, visit: (n: StructuralSchema, p: string) => void): void {
  visit(node, path);
  for (const [k, v] of Object.entries(node.properties ?? {})) walk(v, `${path}.${k}`, visit);
  if (node.items) walk(node.items, `${path}[]`, visit);
  if (node.additionalProperties) walk(node.additionalProperties, `${path}{}`, visit);
}

describe('buildCrds', () => {
  const crds = buildCrds();

  it('defines the three kinds with short names, status subresource and printer columns', () => {
    expect(crds.map((c) => c.metadata.name)).toEqual([
      'shardingconfigs.ctrlmesh.kusionstack.io',
      'circuitbreakers.ctrlmesh.kusionstack.io',
      'faultinjections.ctrlmesh.kusionstack.io',
    ]);
    expect(crds.map((c) => (c.spec.names as { shortNames: string[] }).shortNames)).toEqual([['shard'], ['cbk'], ['fj']]);
    for (const crd of crds) {
      const [version] = crd.spec.versions as { subresources: unknown; additionalPrinterColumns: unknown[] }[];
      expect(version?.subresources).toEqual({ status: {} });
      expect(version?.additionalPrinterColumns.length).toBeGreaterThan(0);
    }
  });

  it('gives every schema node a type (structural), with no preserve-unknown-fields', () => {
    for (const crd of crds) {
      const [version] = crd.spec.versions as { schema: { openAPIV3Schema: StructuralSchema } }[];
      walk(version!.schema.openAPIV3Schema, crd.metadata.name, (node, path) => {
        expect(node.type !== undefined || node['x-kubernetes-int-or-string'] === true, path).toBe(true);
        expect(node, path).not.toHaveProperty('x-kubernetes-preserve-unknown-fields');
        expect(node, path).not.toHaveProperty('anyOf');
      });
    }
  });

  it('accepts both limit forms in the schema', () => {
    const [sharding] = crds;
    const limits = (sharding!.spec.versions as { schema: { openAPIV3Schema: StructuralSchema } }[])[0]!.schema.openAPIV3Schema
      .properties!.spec!.properties!.limits!.items!;
    expect(Object.keys(limits.properties ?? {}).sort()).toEqual(['objectSelector', 'relateResources', 'selector']);
  });
});
