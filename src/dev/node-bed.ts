import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import { startApiServer, type ApiServerHandle, type ClusterInfo } from './api-server.js';
import { startEtcd, type EtcdHandle } from './etcd.js';
import { buildProjectImages, importImages, type ProjectImageName } from './images/index.js';
import { installMesh, type InstalledMesh, type MeshInstallOptions } from './mesh/install.js';
import { nodeAddress } from './node/address.js';
import { POD_BRIDGE } from './node/cni.js';
import { startNode, type NodeHandle } from './node/node.js';
import { NODE_TOOL_NAMES } from './tool-specs.js';
import { resolveTool, type ToolOptions } from './tools.js';

/** The NATS Service's ClusterIP (inside the bed's service range 10.0.0.0/24): clients and its certificate use it. */
const NATS_CLUSTER_IP = '10.0.0.10';
/** The `kubernetes` Service, as pods reach the API server. */
const IN_CLUSTER_SERVER = 'https://10.0.0.1:443';
export const NODE_BED_INFO_FILE = 'nodebed.json';

export interface NodeBedOptions extends ToolOptions {
  /** Holds every server's data, logs and pid files, the images' import state, the mesh's credentials and values. */
  dir: string;
  /** The cluster's name (and the registry's). */
  cluster?: string;
  /** Kinds the operators on this node shard: the agent may label only these. */
  relatedResources?: MeshInstallOptions['relatedResources'];
  logger?: Logger;
  signal?: AbortSignal;
}

/** The bed's details, also written to `<dir>/nodebed.json`. */
export interface NodeBedInfo {
  dir: string;
  cluster: ClusterInfo;
  node: { name: string; address: string; containerdAddress: string };
  images: { controllermesh: string; nats: string; sampleController: string; conformanceOperator: string; pause: string };
  mesh: InstalledMesh;
  /** The API server as pods reach it (the `kubernetes` Service). */
  inClusterServer: string;
  /** Every request the API server executed (Metadata level), e.g. to tell who made a request. */
  auditLogPath: string;
  /** Milliseconds each stage took: tools and images (cached after the first run), node Ready, mesh Ready. */
  timings: { buildMs: number; nodeReadyMs: number; meshReadyMs: number };
}

export interface NodeBed {
  info: NodeBedInfo;
  node: NodeHandle;
  apiServer: ApiServerHandle;
  /** Stops the mesh's pods with the node, then the API server and etcd; leaves no process or mount behind. */
  down(): Promise<void>;
}

/**
 * One cluster with a real node (containerd, runc, kubelet, kube-proxy, scheduler, controller-manager) and the mesh
 * helm-installed in it: NATS with JetStream, the hub (2 replicas) and the agent (webhooks, sidecar injection), all
 * from images built here and imported into containerd. What `ctrlmesh dev up --node` runs.
 */
export async function startNodeBed(options: NodeBedOptions): Promise<NodeBed> {
  const dir = resolve(options.dir);
  const name = options.cluster ?? 'cluster-a';
  const onProgress = options.onProgress ?? (() => undefined);
  const common = { env: options.env, logger: options.logger, signal: options.signal, onProgress };
  await Promise.all(['etcd', name, 'mesh', NODE_BED_INFO_FILE].map((entry) => rm(join(dir, entry), { recursive: true, force: true })));
  await mkdir(dir, { recursive: true });

  let started = Date.now();
  // Every build first, one at a time, with progress; later runs find them all in the caches.
  const helm = (await resolveTool('helm', common)).path;
  for (const tool of ['etcd', 'kube-apiserver', 'conformance-operator', ...NODE_TOOL_NAMES] as const) await resolveTool(tool, common);
  const built = await buildProjectImages(common);
  const ref = (image: ProjectImageName): string => built.find((b) => b.name === image)?.ref as string;
  const buildMs = Date.now() - started;

  // Never the node's own pod bridge, which an earlier run may have left.
  const { address } = nodeAddress(undefined, [POD_BRIDGE]);
  const stack: { stop(): Promise<void> }[] = [];
  const down = async (): Promise<void> => {
    for (const s of stack.reverse()) await s.stop();
  };
  try {
    started = Date.now();
    onProgress(`starting etcd and kube-apiserver ${name} (advertised at ${address}), then the node`);
    const etcd: EtcdHandle = await startEtcd({ ...common, dir: join(dir, 'etcd') });
    stack.push(etcd);
    const auditLogPath = join(dir, name, 'audit.log');
    const apiServer = await startApiServer({ ...common, etcd, name, dir: join(dir, name), node: { address }, auditLogPath });
    stack.push(apiServer);
    const node = await startNode({ ...common, cluster: apiServer, dir: join(dir, 'node'), sandboxImage: ref('pause') });
    stack.push(node);
    await importImages({ address: node.containerdAddress, archives: built, onProgress, ...(options.signal ? { signal: options.signal } : {}) });
    const nodeReadyMs = Date.now() - started;
    onProgress(`node ${node.name} Ready with the images in ${(nodeReadyMs / 1000).toFixed(1)} s`);

    started = Date.now();
    const mesh = await installMesh({
      kubeconfigPath: apiServer.kubeconfigPath,
      cluster: name,
      images: { controllermesh: ref('controllermesh'), nats: ref('nats-server') },
      helm,
      dir: join(dir, 'mesh'),
      natsClusterIp: NATS_CLUSTER_IP,
      relatedResources: options.relatedResources ?? [{ apiGroups: [''], resources: ['configmaps'] }],
      onProgress,
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const meshReadyMs = Date.now() - started;
    const info: NodeBedInfo = {
      dir,
      cluster: {
        name,
        server: apiServer.server,
        caPem: apiServer.caPem,
        clientCertPem: apiServer.clientCertPem,
        clientKeyPem: apiServer.clientKeyPem,
        kubeconfigPath: apiServer.kubeconfigPath,
      },
      node: { name: node.name, address, containerdAddress: node.containerdAddress },
      images: {
        controllermesh: ref('controllermesh'),
        nats: ref('nats-server'),
        sampleController: ref('sample-controller'),
        conformanceOperator: ref('conformance-operator'),
        pause: ref('pause'),
      },
      mesh,
      inClusterServer: IN_CLUSTER_SERVER,
      auditLogPath,
      timings: { buildMs, nodeReadyMs, meshReadyMs },
    };
    await writeFile(join(dir, NODE_BED_INFO_FILE), `${JSON.stringify(info, null, 2)}\n`, { mode: 0o600 });
    return { info, node, apiServer, down };
  } catch (err) {
    await down();
    throw err;
  }
}
