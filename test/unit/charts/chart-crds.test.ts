import { readFileSync } from 'node:fs';
import { dumpYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { buildCrds } from '../../../src/api/index.js';

// The charts carry a copy of the CRDs (Helm installs crds/ before the templates); src/api is their one source.
const CHARTS = ['ctrlmesh-hub', 'ctrlmesh-agent'];

describe('chart CRDs', () => {
  const expected = buildCrds()
    .map((crd) => dumpYaml(crd))
    .join('---\n');

  it.each(CHARTS)('%s carries the CRDs `ctrlmesh crds` prints (else run scripts/generate-chart-crds.sh)', (chart) => {
    const path = new URL(`../../../charts/${chart}/crds/ctrlmesh.kusionstack.io.yaml`, import.meta.url);
    expect(readFileSync(path, 'utf8')).toBe(expected);
  });
});
