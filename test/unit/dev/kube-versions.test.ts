import { describe, expect, it } from 'vitest';
import { ErrorCodes } from '../../../src/errors.js';
import { DEFAULT_KUBE_VERSION, parseKubeVersion, selectKubeVersion, TOOL_SPECS, toolSpec } from '../../../src/dev/index.js';

describe('Kubernetes version selection', () => {
  it('reads a minor or a full release, with or without the v', () => {
    for (const text of ['v1.37', '1.37', 'v1.37.2', ' 1.37.2 ']) expect(parseKubeVersion(text, 'test').version).toBe('v1.37.2');
    for (const text of ['v1.33', 'v1.33.13']) expect(parseKubeVersion(text, 'test')).toBe(DEFAULT_KUBE_VERSION);
  });

  it('refuses an unknown version, naming where it came from and what is known', () => {
    for (const text of ['v1.34', 'v1.37.1', 'latest', '']) {
      expect(() => parseKubeVersion(text, 'CTRLMESH_KUBE_VERSION')).toThrow(
        expect.objectContaining({ code: ErrorCodes.USAGE, message: expect.stringMatching(/^CTRLMESH_KUBE_VERSION: unknown .*v1\.33 \(v1\.33\.13\), v1\.37 \(v1\.37\.2\)$/) }),
      );
    }
  });

  it('takes the flag over the environment variable over the default', () => {
    expect(selectKubeVersion(undefined, {})).toBe(DEFAULT_KUBE_VERSION);
    expect(selectKubeVersion(undefined, { CTRLMESH_KUBE_VERSION: 'v1.37' }).version).toBe('v1.37.2');
    expect(selectKubeVersion('v1.33', { CTRLMESH_KUBE_VERSION: 'v1.37' })).toBe(DEFAULT_KUBE_VERSION);
    expect(() => selectKubeVersion('v9', {})).toThrow(/^--kube-version: unknown/);
  });

  it('builds each minor in its own wrapper module, with its true /version and its own cache file and variable', () => {
    const next = parseKubeVersion('v1.37', 'test');
    expect(toolSpec('kube-apiserver')).toEqual(TOOL_SPECS['kube-apiserver']);
    expect(toolSpec('kube-apiserver', DEFAULT_KUBE_VERSION)).toMatchObject({
      version: 'v1.33.13',
      envVar: 'CTRLMESH_KUBE_APISERVER',
      inKubebuilderAssets: true,
      recipe: { moduleDir: 'kubernetes', ldflags: expect.stringContaining('version.gitMinor=33') },
    });
    expect(toolSpec('kube-apiserver', next)).toMatchObject({
      version: 'v1.37.2',
      envVar: 'CTRLMESH_KUBE_APISERVER_V1_37',
      inKubebuilderAssets: false,
      recipe: { kind: 'build', moduleDir: 'kubernetes-1.37', pkg: 'k8s.io/kubernetes/cmd/kube-apiserver', ldflags: expect.stringContaining('version.gitVersion=v1.37.2') },
    });
    expect(toolSpec('kube-apiserver', next).recipe.ldflags).toContain('version.gitMinor=37');
    // Only kube-apiserver has a second minor.
    expect(toolSpec('kubectl', next)).toBe(TOOL_SPECS.kubectl);
    expect(DEFAULT_KUBE_VERSION.apiServerArgs).toEqual([]);
    expect(next.apiServerArgs).toEqual(['--feature-gates=ShardedListAndWatch=true', '--endpoint-reconciler-type=none']);
  });
});
