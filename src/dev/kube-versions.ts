import { UsageError } from '../errors.js';

/** One Kubernetes minor the test bed can run: which kube-apiserver, built in which wrapper module, with which flags. */
export interface KubeVersion {
  /** What users type: `v1.33`. */
  minor: string;
  /** The pinned release, which the cached binary's name and its /version carry: `v1.33.13`. */
  version: string;
  /** The wrapper module under tools/ that pins this release. */
  moduleDir: string;
  /** kube-apiserver flags this minor alone runs with. */
  apiServerArgs: readonly string[];
}

/** Selects the minor for `ctrlmesh dev up`, `ctrlmesh dev tools` and the integration tests' shared bed. */
export const KUBE_VERSION_ENV = 'CTRLMESH_KUBE_VERSION';

/** The first is the default; kubectl and a real node's components always come from it. */
export const KUBE_VERSIONS: readonly [KubeVersion, ...KubeVersion[]] = [
  { minor: 'v1.33', version: 'v1.33.13', moduleDir: 'kubernetes', apiServerArgs: [] },
  {
    minor: 'v1.37',
    version: 'v1.37.2',
    moduleDir: 'kubernetes-1.37',
    apiServerArgs: [
      // Server-side shard selectors (docs/shard-selectors.md) are alpha in this minor, behind a feature gate.
      '--feature-gates=ShardedListAndWatch=true',
      // This minor refuses to start with a loopback --advertise-address under the default (lease) endpoint reconciler
      // ("cannot use public IP 127.0.0.1 with endpoint reconciler"); the bed's servers listen on loopback only and
      // nothing reads the `kubernetes` Service's endpoints there, so none is kept.
      '--endpoint-reconciler-type=none',
    ],
  },
];

export const DEFAULT_KUBE_VERSION: KubeVersion = KUBE_VERSIONS[0];

/** `v1.37`, `1.37`, `v1.37.2` or `1.37.2`; anything else is a usage error naming `source` and the known versions. */
export function parseKubeVersion(text: string, source: string): KubeVersion {
  const wanted = text.trim().replace(/^(?!v)/, 'v');
  const found = KUBE_VERSIONS.find((k) => k.minor === wanted || k.version === wanted);
  if (found) return found;
  const known = KUBE_VERSIONS.map((k) => `${k.minor} (${k.version})`).join(', ');
  throw new UsageError(`${source}: unknown Kubernetes version "${text}"; the test bed runs ${known}`);
}

/** The flag's value if given, else the environment variable's, else the default. */
export function selectKubeVersion(flag: string | undefined, env: NodeJS.ProcessEnv): KubeVersion {
  if (flag !== undefined) return parseKubeVersion(flag, '--kube-version');
  const fromEnv = env[KUBE_VERSION_ENV];
  return fromEnv ? parseKubeVersion(fromEnv, KUBE_VERSION_ENV) : DEFAULT_KUBE_VERSION;
}
