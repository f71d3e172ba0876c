/** The test servers and clients (and helm, which checks the charts) ControllerMesh builds from pinned Go modules. */
export const TOOL_NAMES = ['etcd', 'nats-server', 'kube-apiserver', 'kubectl', 'helm'] as const;
/** What a real node adds (`ctrlmesh dev up --node`): built only when a node is asked for. */
export const NODE_TOOL_NAMES = ['kubelet', 'kube-proxy', 'kube-scheduler', 'kube-controller-manager', 'sample-controller'] as const;
export type ToolName = (typeof TOOL_NAMES)[number] | (typeof NODE_TOOL_NAMES)[number];

const KUBERNETES_VERSION = 'v1.33.13';
// -X flags give the binaries a true /version (a plain module build reports v0.0.0).
const KUBERNETES_LDFLAGS = [
  '-s -w',
  `-X k8s.io/component-base/version.gitVersion=${KUBERNETES_VERSION}`,
  '-X k8s.io/component-base/version.gitMajor=1',
  '-X k8s.io/component-base/version.gitMinor=33',
].join(' ');

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
  'kube-apiserver': {
    name: 'kube-apiserver',
    version: KUBERNETES_VERSION,
    envVar: 'CTRLMESH_KUBE_APISERVER',
    inKubebuilderAssets: true,
    recipe: { kind: 'build', moduleDir: 'kubernetes', pkg: 'k8s.io/kubernetes/cmd/kube-apiserver', ldflags: KUBERNETES_LDFLAGS },
    origin: 'k8s.io/kubernetes (tools/kubernetes)',
  },
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
