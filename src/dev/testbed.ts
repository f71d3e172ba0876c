import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import { startApiServer, type ApiServerHandle, type ClusterInfo } from './api-server.js';
import { startEtcd, type EtcdHandle } from './etcd.js';
import { writeKubeconfig } from './kubeconfig.js';
import { startNats, type NatsEndpoint, type NatsHandle } from './nats.js';
import { startNatsCluster, type NatsClusterHandle } from './nats-cluster.js';
import { DEFAULT_KUBE_VERSION } from './kube-versions.js';
import { resolveTool, type ToolOptions } from './tools.js';

export interface TestbedOptions extends ToolOptions {
  /** How many clusters (named cluster-a, cluster-b, ...) or their names; default 2. */
  clusters?: number | readonly string[];
  /** Holds every server's data, certificates, logs and pid files, the kubeconfigs and testbed.json. */
  dir: string;
  /** NATS servers: 1 (default) or a cluster of that many, with JetStream replicated across them. */
  natsServers?: number;
  logger?: Logger;
  /** Aborting it stops a start in progress (and what it already started). */
  signal?: AbortSignal;
}

/** The whole bed's connection details, also written to `<dir>/testbed.json`. */
export interface TestbedInfo {
  dir: string;
  clusters: ClusterInfo[];
  /** One kubeconfig with a context per cluster. */
  kubeconfigPath: string;
  /** `url` is the first server's; `urls` and `monitorUrls` list every server's, in the same order. */
  nats: NatsEndpoint & { urls: string[]; monitorUrl: string; monitorUrls: string[] };
  etcd: { url: string };
  /** The Kubernetes release every kube-apiserver of the bed runs, e.g. `v1.33.13` (`kubeVersion` in the options). */
  kubeVersion: string;
}

export interface Testbed {
  dir: string;
  clusters: ApiServerHandle[];
  /** One server, or a cluster (with `servers`) when the bed was started with `natsServers` above 1. */
  nats: NatsHandle | NatsClusterHandle;
  etcd: EtcdHandle;
  info: TestbedInfo;
  /** Stops every server; resolves once none is left running. */
  down(): Promise<void>;
}

const TESTBED_INFO_FILE = 'testbed.json';

interface Stoppable {
  stop(): Promise<void>;
}

/** cluster-a, cluster-b, ... for a count; names as given otherwise. */
export function clusterNames(clusters: number | readonly string[]): string[] {
  if (typeof clusters !== 'number') return [...clusters];
  return Array.from({ length: clusters }, (_, i) => `cluster-${String.fromCharCode(97 + (i % 26))}${i >= 26 ? Math.floor(i / 26) : ''}`);
}

/** Stops servers in reverse dependency order: API servers before the etcd they write to. */
async function stopAll(apiServers: readonly Stoppable[], others: readonly Stoppable[]): Promise<void> {
  await Promise.all(apiServers.map((s) => s.stop()));
  await Promise.all(others.map((s) => s.stop()));
}

/** Waits for every start to finish (so each started server is tracked and can be stopped), then throws the first failure. */
async function settleAll<T extends readonly unknown[]>(promises: { [K in keyof T]: Promise<T[K]> }): Promise<T> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** Starts one etcd, one kube-apiserver per cluster and NATS with JetStream (one server or a cluster), all on 127.0.0.1. */
export async function startTestbed(options: TestbedOptions): Promise<Testbed> {
  const dir = resolve(options.dir);
  const names = clusterNames(options.clusters ?? 2);
  const natsServers = options.natsServers ?? 1;
  const onProgress = options.onProgress ?? (() => undefined);
  const kubeVersion = options.kubeVersion ?? DEFAULT_KUBE_VERSION;
  const common = { env: options.env, logger: options.logger, signal: options.signal };
  // A bed always starts fresh: data of an earlier bed in the same dir holds other ports, certificates and keys.
  await Promise.all(['etcd', 'nats', ...names, 'kubeconfig', TESTBED_INFO_FILE].map((entry) => rm(join(dir, entry), { recursive: true, force: true })));
  await mkdir(dir, { recursive: true });
  // Resolve one tool at a time first: a missing one is built, and never two heavy builds at once.
  const etcdBinary = (await resolveTool('etcd', options)).path;
  const natsBinary = (await resolveTool('nats-server', options)).path;
  const apiServerBinary = (await resolveTool('kube-apiserver', options)).path;

  onProgress(
    `starting etcd, ${natsServers === 1 ? 'nats-server' : `${natsServers} nats-servers`} and ${names.length} kube-apiserver(s) ${kubeVersion.version} in ${dir}`,
  );
  const started: Stoppable[] = [];
  const apiServers: Stoppable[] = [];
  const track = (list: Stoppable[]) => <T extends Stoppable>(handle: T): T => {
    list.push(handle);
    return handle;
  };
  try {
    const natsStart: Promise<NatsHandle | NatsClusterHandle> =
      natsServers === 1
        ? startNats({ ...common, binary: natsBinary, dir: join(dir, 'nats') })
        : startNatsCluster({ ...common, binary: natsBinary, dir: join(dir, 'nats'), servers: natsServers });
    const [etcd, nats] = await settleAll([
      startEtcd({ ...common, binary: etcdBinary, dir: join(dir, 'etcd') }).then(track(started)),
      natsStart.then(track(started)),
    ]);
    onProgress(`etcd ready at ${etcd.url}; NATS ready at ${nats.urls.join(', ')}`);
    const clusters = await settleAll(
      names.map((name) =>
        startApiServer({ ...common, kubeVersion, binary: apiServerBinary, etcd, name, dir: join(dir, name) })
          .then(track(apiServers))
          .then((handle) => {
            onProgress(`kube-apiserver ${name} ready at ${handle.server}`);
            return handle;
          }),
      ),
    );
    const info: TestbedInfo = {
      dir,
      clusters: clusters.map(({ name, server, caPem, clientCertPem, clientKeyPem, kubeconfigPath }) => ({
        name,
        server,
        caPem,
        clientCertPem,
        clientKeyPem,
        kubeconfigPath,
      })),
      kubeconfigPath: join(dir, 'kubeconfig'),
      nats: {
        url: nats.url,
        urls: nats.urls,
        monitorUrl: nats.monitorUrl,
        monitorUrls: 'servers' in nats ? nats.servers.map((s) => s.monitorUrl) : [nats.monitorUrl],
        ...(nats.security ? { security: nats.security } : {}),
      },
      etcd: { url: etcd.url },
      kubeVersion: kubeVersion.version,
    };
    await writeKubeconfig(info.kubeconfigPath, info.clusters);
    await writeFile(join(dir, TESTBED_INFO_FILE), `${JSON.stringify(info, null, 2)}\n`, { mode: 0o600 });
    return { dir, clusters, nats, etcd, info, down: () => stopAll(clusters, [etcd, nats]) };
  } catch (err) {
    await stopAll(apiServers, started);
    throw err;
  }
}
