export { startApiServer, type ApiServerHandle, type ApiServerOptions, type ClusterInfo } from './api-server.js';
export { createCertificateAuthority, generateKeyPairPem, issueCertificate, type CertificateAuthority, type IssuedCertificate, type IssueOptions } from './certs.js';
export { stopLeftovers } from './leftovers.js';
export { ToolError, TestbedError } from './errors.js';
export { startEtcd, type EtcdHandle, type EtcdOptions } from './etcd.js';
export { freePort } from './free-port.js';
export { kubeconfigText, writeKubeconfig, type KubeconfigEntry } from './kubeconfig.js';
export { natsClientConfig, natsUrls, startNats, type NatsEndpoint, type NatsHandle, type NatsOptions, type NatsSecurity } from './nats.js';
export { startNatsCluster, type NatsClusterHandle, type NatsClusterOptions, type NatsServerHandle } from './nats-cluster.js';
export { livePidRecords, recordOwner, type PidRecord } from './pid-file.js';
export type { ServerControl, ServerStartOptions } from './server-process.js';
export {
  clusterNames,
  startTestbed,
  TESTBED_INFO_FILE,
  type Testbed,
  type TestbedInfo,
  type TestbedOptions,
} from './testbed.js';
export { NODE_TOOL_NAMES, TOOL_NAMES, TOOL_SPECS, type ToolName } from './tool-specs.js';
export { findTool, provisionTools, resolveTool, toolCacheDir, type ResolvedTool, type ToolOptions } from './tools.js';
export { parseMetricsText, sumBy, type Sample } from './metrics-text.js';
export { prometheusConfig, startPrometheus, type PrometheusHandle, type PrometheusOptions, type ScrapeTarget } from './prometheus.js';
export { dashboardQueries, executableQuery, metricFamilies, type DashboardQuery } from './dashboard-queries.js';
export { DEMO_NAMESPACE, DEMO_OPERATOR, startDemoMesh, type DemoMesh, type DemoMeshOptions, type DemoShard } from './demo-mesh.js';
export * from './images/index.js';
export { nodeAddress, type NodeAddress } from './node/address.js';
export { cleanupNodeLeftovers, DEFAULT_SANDBOX_IMAGE, describeCleanup, startNode, type NodeCleanupReport, type NodeHandle, type NodeKubeconfigs, type NodeOptions } from './node/node.js';
export { CLUSTER_CIDR, cniConfList, POD_BRIDGE, POD_SUBNET } from './node/cni.js';
export { containerdConfigText, containerdPaths, type ContainerdPaths } from './node/containerd.js';
export { kubeletConfig, podResolvConf } from './node/kubelet.js';
export { kubeProxyConfig, type ProxyMode } from './node/kube-proxy.js';
export { schedulerConfig } from './node/control-plane.js';
export { startNodeBed, NODE_BED_INFO_FILE, type NodeBed, type NodeBedInfo, type NodeBedOptions } from './node-bed.js';
export { installMesh, MESH_NAMESPACE, type InstalledMesh, type MeshInstallOptions } from './mesh/install.js';
