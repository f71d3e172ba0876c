import { spawn } from 'node:child_process';
import { PassThrough } from 'node:stream';
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  Exec,
  KubeConfig,
  KubernetesObjectApi,
  RbacAuthorizationV1Api,
  type KubernetesObject,
  type V1Pod,
  type V1Status,
} from '@kubernetes/client-node';
import { isApiStatus } from '../../src/kube/index.js';
import { eventually } from '../integration/control-fixture.js';

/** The admin's clients of the node's cluster. */
export interface Clients {
  kc: KubeConfig;
  core: CoreV1Api;
  apps: AppsV1Api;
  rbac: RbacAuthorizationV1Api;
  custom: CustomObjectsApi;
  objects: KubernetesObjectApi;
}

export function clients(kubeconfigPath: string): Clients {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  return {
    kc,
    core: kc.makeApiClient(CoreV1Api),
    apps: kc.makeApiClient(AppsV1Api),
    rbac: kc.makeApiClient(RbacAuthorizationV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
    objects: KubernetesObjectApi.makeApiClient(kc),
  };
}

/** Server-side apply of each object, as `kubectl apply --server-side` does. */
export async function applyAll(c: Clients, objects: readonly KubernetesObject[]): Promise<void> {
  for (const obj of objects) {
    await c.objects.patch(obj, undefined, undefined, 'ctrlmesh-node-test', true, 'application/apply-patch+yaml');
  }
}

/** Deletes an object; already gone is fine. */
export async function deleteIfPresent(remove: () => Promise<unknown>): Promise<void> {
  try {
    await remove();
  } catch (err) {
    if (!isApiStatus(err, 404)) throw err;
  }
}

export function isReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

/** Waits until `count` pods match the selector, every one Ready, and returns them by name. */
export async function readyPods(c: Clients, namespace: string, selector: string, count: number, timeoutMs = 240_000): Promise<V1Pod[]> {
  return eventually(
    async () => {
      const pods = (await c.core.listNamespacedPod({ namespace, labelSelector: selector })).items.filter((p) => !p.metadata?.deletionTimestamp);
      const ready = pods.filter(isReady);
      if (pods.length !== count || ready.length !== count) {
        const states = pods.map((p) => `${p.metadata?.name}: ${p.status?.phase} ${JSON.stringify(p.status?.containerStatuses?.map((s) => s.state) ?? [])}`);
        throw new Error(`${ready.length}/${count} pods Ready for ${selector} in ${namespace}: ${states.join('; ')}`);
      }
      return pods.sort((a, b) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? ''));
    },
    timeoutMs,
    1000,
  );
}

/** A container's log, through the API server and the kubelet, as `kubectl logs` reads it. */
export async function podLog(c: Clients, namespace: string, pod: string, container: string, previous = false): Promise<string> {
  return c.core.readNamespacedPodLog({ name: pod, namespace, container, previous });
}

/** A `kubectl port-forward` to one pod's port: it connects inside the pod, so it reaches a port bound to 127.0.0.1. */
export interface PortForward {
  url: string;
  close(): void;
}

/** Starts `kubectl port-forward pod/<pod> :<port>` and resolves once it prints its local address. */
export function portForward(kubectl: string, kubeconfigPath: string, namespace: string, pod: string, port: number): Promise<PortForward> {
  return new Promise((resolve, reject) => {
    const child = spawn(kubectl, ['--kubeconfig', kubeconfigPath, '--namespace', namespace, 'port-forward', `pod/${pod}`, `:${port}`, '--address', '127.0.0.1'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const timer = setTimeout(() => {
      child.kill();
      reject(new Error(`kubectl port-forward ${namespace}/${pod}:${port} printed no address within 30 s: ${output}`));
    }, 30_000);
    const read = (chunk: Buffer): void => {
      output += chunk.toString();
      const local = /Forwarding from 127\.0\.0\.1:(\d+) ->/u.exec(output)?.[1];
      if (local === undefined) return;
      clearTimeout(timer);
      resolve({ url: `http://127.0.0.1:${local}`, close: () => void child.kill() });
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`kubectl port-forward ${namespace}/${pod}:${port} exited ${code}: ${output}`));
    });
  });
}

/** What a command run in a container by `kubectl exec` printed, and its exit code. */
export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command in a pod's container through the API server and the kubelet, as `kubectl exec` does. */
export async function execIn(c: Clients, namespace: string, pod: string, container: string, command: readonly string[], timeoutMs = 60_000): Promise<ExecResult> {
  const [stdout, stderr] = [new PassThrough(), new PassThrough()];
  let out = '';
  let err = '';
  stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  return new Promise<ExecResult>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`exec in ${namespace}/${pod}/${container} ran over ${timeoutMs} ms: ${out}${err}`)), timeoutMs);
    const done = (status: V1Status): void => {
      clearTimeout(timer);
      // A failed command's status carries its exit code as the cause ExitCode.
      const exit = status.details?.causes?.find((x) => x.reason === 'ExitCode')?.message;
      const code = status.status === 'Success' ? 0 : Number(exit ?? -1);
      // The status frame may come before the streams' last chunks are read.
      setTimeout(() => resolve({ code, stdout: out, stderr: err }), 100);
    };
    new Exec(c.kc).exec(namespace, pod, container, [...command], stdout, stderr, null, false, done).catch((e: unknown) => {
      clearTimeout(timer);
      reject(e instanceof Error ? e : new Error(String(e)));
    });
  });
}
