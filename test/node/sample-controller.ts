import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadYaml, type KubernetesObject } from '@kubernetes/client-node';
import { TOOL_SPECS } from '../../src/dev/index.js';

/**
 * The Foo CRD exactly as k8s.io/sample-controller ships it (with the status subresource its UpdateStatus needs),
 * read from the same module version the binary was built from (the Go module cache has it after the build).
 */
export function fooCrd(): KubernetesObject {
  const version = TOOL_SPECS['sample-controller'].version;
  const info = JSON.parse(execFileSync('go', ['mod', 'download', '-json', `k8s.io/sample-controller@${version}`], { encoding: 'utf8' })) as { Dir?: string; Error?: string };
  if (!info.Dir) throw new Error(`k8s.io/sample-controller@${version}: ${info.Error ?? 'no module directory'}`);
  return loadYaml<KubernetesObject>(readFileSync(join(info.Dir, 'artifacts', 'examples', 'crd-status-subresource.yaml'), 'utf8'));
}
