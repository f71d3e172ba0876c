// The local test bed: used by `ctrlmesh dev`, the demo (src/demo), the tests and the benchmarks; never by production code.
export { startApiServer, type ApiServerHandle, type ClusterInfo } from './api-server.js';
export { stopLeftovers } from './leftovers.js';
export { TestbedError } from '../errors.js';
export { startEtcd, type EtcdHandle } from './etcd.js';
export { freePort } from './free-port.js';
export { kubeconfigText, writeKubeconfig } from './kubeconfig.js';
export { natsClientConfig, natsUrls, startNats, type NatsEndpoint, type NatsHandle, type NatsSecurity } from './nats.js';
export { startNatsCluster, type NatsClusterHandle, type NatsServerHandle } from './nats-cluster.js';
export { packageRoot } from './package-root.js';
export { livePidRecords, recordOwner } from './pid-file.js';
export { httpOk } from './probes.js';
export { ServerProcess } from './server-process.js';
export { clusterNames, startTestbed, type Testbed, type TestbedInfo } from './testbed.js';
export { DEFAULT_KUBE_VERSION, KUBE_VERSION_ENV, KUBE_VERSIONS, parseKubeVersion, selectKubeVersion, type KubeVersion } from './kube-versions.js';
export { kubeApiServerSpec, TOOL_SPECS, toolSpec } from './tool-specs.js';
export { findTool, provisionTools, resolveTool } from './tools.js';
export { startPrometheus, type PrometheusHandle, type ScrapeTarget } from './prometheus.js';
export {
  assembleRootfs,
  buildProjectImage,
  CONTAINERD_NAME_ANNOTATION,
  imageCacheDir,
  imageRefs,
  MEDIA_TYPES,
  OCI_REF_NAME_ANNOTATION,
  parseImageList,
  parseImageRef,
  parseLddOutput,
  sharedLibraries,
  writeOciArchive,
  type OciArchiveResult,
} from './images/index.js';
export { cleanupNodeLeftovers, describeCleanup } from './node/node.js';
export { startNodeBed, type NodeBed } from './node-bed.js';
export type { InstalledMesh } from './mesh/install.js';
