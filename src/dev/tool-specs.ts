import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_KUBE_VERSION, type KubeVersion } from './kube-versions.js';
import { packageRoot } from './package-root.js';

/**
 * The test servers and clients (and helm, which checks the charts) ControllerMesh builds from pinned Go modules, and
 * the controller-runtime operator the conformance suite shards.
 */
export const TOOL_NAMES = ['etcd', 'nats-server', 'kube-apiserver', 'kubectl', 'helm', 'conformance-operator'] as const;
/** What a real node adds (`ctrlmesh dev up --node`): built only when a node is asked for. */
export const NODE_TOOL_NAMES = ['kubelet', 'kube-proxy', 'kube-scheduler', 'kube-controller-manager', 'sample-controller', 'kube-router'] as const;
export type ToolName = (typeof TOOL_NAMES)[number] | (typeof NODE_TOOL_NAMES)[number];

const KUBERNETES_VERSION = DEFAULT_KUBE_VERSION.version;

/** -X flags give the binaries a true /version (a plain module build reports v0.0.0). */
function kubernetesLdflags(version: string): string {
  const [major, minor] = version.replace(/^v/, '').split('.');
  return [
    '-s -w',
    `-X k8s.io/component-base/version.gitVersion=${version}`,
    `-X k8s.io/component-base/version.gitMajor=${major}`,
    `-X k8s.io/component-base/version.gitMinor=${minor}`,
  ].join(' ');
}
const KUBERNETES_LDFLAGS = kubernetesLdflags(KUBERNETES_VERSION);

/** How a tool is built: `go build` of a package inside one of the wrapper modules under tools/, or `go install pkg@version`. */
export type GoRecipe =
  | { kind: 'build'; moduleDir: string; pkg: string; ldflags: string }
  | { kind: 'install'; pkg: string; binaryName: string; ldflags: string };

export interface ToolSpec {
  name: ToolName;
  version: string;
  /** An explicit path in this variable wins over everything else. */
  envVar: string;
  /** Whether KUBEBUILDER_ASSETS (envtest's directory of binaries) may hold it. */
  inKubebuilderAssets: boolean;
  recipe: GoRecipe;
  /** Shown while building, so a long first build explains itself. */
  origin: string;
}

export const TOOL_SPECS: Record<ToolName, ToolSpec> = {
  etcd: {
    name: 'etcd',
    version: 'v3.5.21',
    envVar: 'CTRLMESH_ETCD',
    inKubebuilderAssets: true,
    recipe: { kind: 'build', moduleDir: 'etcd', pkg: 'go.etcd.io/etcd/server/v3', ldflags: '-s -w' },
    origin: 'go.etcd.io/etcd/server/v3 (tools/etcd)',
  },
  'nats-server': {
    name: 'nats-server',
    version: 'v2.14.9',
    envVar: 'CTRLMESH_NATS_SERVER',
    inKubebuilderAssets: false,
    recipe: { kind: 'install', pkg: 'github.com/nats-io/nats-server/v2@v2.14.9', binaryName: 'nats-server', ldflags: '-s -w' },
    origin: 'github.com/nats-io/nats-server/v2',
  },
  'kube-apiserver': kubeApiServerSpec(DEFAULT_KUBE_VERSION),
  kubectl: {
    name: 'kubectl',
    version: KUBERNETES_VERSION,
    envVar: 'CTRLMESH_KUBECTL',
    inKubebuilderAssets: true,
    recipe: { kind: 'build', moduleDir: 'kubernetes', pkg: 'k8s.io/kubernetes/cmd/kubectl', ldflags: KUBERNETES_LDFLAGS },
    origin: 'k8s.io/kubernetes (tools/kubernetes)',
  },
  helm: {
    name: 'helm',
    version: 'v3.21.4',
    envVar: 'CTRLMESH_HELM',
    inKubebuilderAssets: false,
    recipe: { kind: 'install', pkg: 'helm.sh/helm/v3/cmd/helm@v3.21.4', binaryName: 'helm', ldflags: '-s -w' },
    origin: 'helm.sh/helm/v3',
  },
  kubelet: kubernetesNodeTool('kubelet', 'CTRLMESH_KUBELET'),
  'kube-proxy': kubernetesNodeTool('kube-proxy', 'CTRLMESH_KUBE_PROXY'),
  'kube-scheduler': kubernetesNodeTool('kube-scheduler', 'CTRLMESH_KUBE_SCHEDULER'),
  'kube-controller-manager': kubernetesNodeTool('kube-controller-manager', 'CTRLMESH_KUBE_CONTROLLER_MANAGER'),
  'conformance-operator': {
    name: 'conformance-operator',
    // The project's own source on a pinned controller-runtime: the version names the source, so an edit rebuilds it.
    get version(): string {
      return `v0.25.2-${sourceDigest('controller-runtime', ['go.mod', 'go.sum', 'conformance-operator/main.go'])}`;
    },
    envVar: 'CTRLMESH_CONFORMANCE_OPERATOR',
    inKubebuilderAssets: false,
    recipe: { kind: 'build', moduleDir: 'controller-runtime', pkg: 'ctrlmesh.dev/tools/controller-runtime/conformance-operator', ldflags: '-s -w' },
    origin: 'sigs.k8s.io/controller-runtime v0.25.2 (tools/controller-runtime/conformance-operator)',
  },
  'kube-router': {
    name: 'kube-router',
    // The only v2 release the Go module proxy serves; the node runs its network policy controller alone.
    version: 'v2.1.0',
    envVar: 'CTRLMESH_KUBE_ROUTER',
    inKubebuilderAssets: false,
    recipe: { kind: 'install', pkg: 'github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@v2.1.0', binaryName: 'kube-router', ldflags: '-s -w' },
    origin: 'github.com/cloudnativelabs/kube-router/v2 (its firewall: NetworkPolicy enforcement with iptables and ipset)',
  },
  'sample-controller': {
    name: 'sample-controller',
    // The newest v0.33 the Go module proxy serves (v0.33.5 and later are not published there).
    version: 'v0.33.4',
    envVar: 'CTRLMESH_SAMPLE_CONTROLLER',
    inKubebuilderAssets: false,
    // Built in the Kubernetes wrapper module, so it shares its compiled client-go (v0.33.13) with the binaries above.
    recipe: { kind: 'build', moduleDir: 'kubernetes', pkg: 'k8s.io/sample-controller', ldflags: '-s -w' },
    origin: 'k8s.io/sample-controller (tools/kubernetes; the upstream example operator, unmodified)',
  },
};

/**
 * kube-apiserver of one Kubernetes minor. The default's variable is CTRLMESH_KUBE_APISERVER and envtest's
 * KUBEBUILDER_ASSETS may hold it; another minor has a variable of its own (CTRLMESH_KUBE_APISERVER_V1_37) and is never
 * taken from KUBEBUILDER_ASSETS, so a binary of the wrong minor is not picked up by accident.
 */
export function kubeApiServerSpec(kube: KubeVersion): ToolSpec {
  const isDefault = kube.version === KUBERNETES_VERSION;
  return {
    name: 'kube-apiserver',
    version: kube.version,
    envVar: isDefault ? 'CTRLMESH_KUBE_APISERVER' : `CTRLMESH_KUBE_APISERVER_${kube.minor.toUpperCase().replace('.', '_')}`,
    inKubebuilderAssets: isDefault,
    recipe: { kind: 'build', moduleDir: kube.moduleDir, pkg: 'k8s.io/kubernetes/cmd/kube-apiserver', ldflags: kubernetesLdflags(kube.version) },
    origin: `k8s.io/kubernetes (tools/${kube.moduleDir})`,
  };
}

/** The spec of a tool; kube-apiserver's depends on the Kubernetes minor (the default when none is given). */
export function toolSpec(name: ToolName, kube: KubeVersion = DEFAULT_KUBE_VERSION): ToolSpec {
  return name === 'kube-apiserver' ? kubeApiServerSpec(kube) : TOOL_SPECS[name];
}

/** A node component built from the same pinned k8s.io/kubernetes module as kube-apiserver. */
function kubernetesNodeTool(name: ToolName, envVar: string): ToolSpec {
  return {
    name,
    version: KUBERNETES_VERSION,
    envVar,
    inKubebuilderAssets: false,
    recipe: { kind: 'build', moduleDir: 'kubernetes', pkg: `k8s.io/kubernetes/cmd/${name}`, ldflags: KUBERNETES_LDFLAGS },
    origin: 'k8s.io/kubernetes (tools/kubernetes)',
  };
}

const digests = new Map<string, string>();

/** The first hex digits of the digest of a wrapper module's files: read once per process. */
function sourceDigest(moduleDir: string, files: string[]): string {
  let digest = digests.get(moduleDir);
  if (digest === undefined) {
    const hash = createHash('sha256');
    for (const file of files) hash.update(`${file}\n`).update(readFileSync(join(packageRoot(), 'tools', moduleDir, file)));
    digest = hash.digest('hex').slice(0, 12);
    digests.set(moduleDir, digest);
  }
  return digest;
}
