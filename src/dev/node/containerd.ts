import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { TestbedError } from '../../errors.js';
import { ServerProcess, serverControl, type ServerControl, type ServerStartOptions } from '../server-process.js';
import { run, tryRun, whichBinary } from './exec.js';

/** The containerd namespace the CRI plugin (so the kubelet) uses; images for pods must be imported into it. */
export const CRI_NAMESPACE = 'k8s.io';

// A unix socket path holds at most 107 bytes; containerd also listens on `<address>.ttrpc`, 6 bytes longer.
export const MAX_SOCKET_PATH = 100;

/** Where containerd keeps what: every path lives under the node's dir, so stop and cleanup know what is ours. */
export interface ContainerdPaths {
  /** The gRPC socket: kubelet's containerRuntimeEndpoint and ctr's --address. */
  address: string;
  /** Content store, snapshots (image layers, container root filesystems), metadata. */
  root: string;
  /** Tasks' bundles, rootfs mounts, pod network namespaces (netns_mounts_under_state_dir), sandboxes' /dev/shm. */
  state: string;
  /** runc's state for our containers, so a leftover container can be found and deleted by runc alone. */
  runcRoot: string;
}

/** Everything under `dir`, the socket too (startContainerd refuses a dir too deep for a unix socket path). */
export function containerdPaths(dir: string): ContainerdPaths {
  const state = join(dir, 'state');
  return { address: join(dir, 'containerd.sock'), root: join(dir, 'root'), state, runcRoot: join(state, 'runc') };
}

export interface ContainerdConfigOptions extends ContainerdPaths {
  /** The pause image every pod sandbox runs; it must already be imported: nothing is ever pulled. */
  sandboxImage: string;
  cniBinDir: string;
  cniConfDir: string;
  /**
   * Clamp containers' oom_score_adj to containerd's own (restrict_oom_score_adj): needed where even root lacks
   * CAP_SYS_RESOURCE, or runc fails every pod sandbox, whose oom_score_adj the kubelet sets to -998.
   */
  restrictOomScoreAdj?: boolean;
}

const toml = (value: string): string => JSON.stringify(value); // a JSON string is a valid TOML basic string

/**
 * containerd's config (version 2, the format containerd 1.6 reads). Plugins that would touch the host outside
 * the node's dir (`opt` creates /opt/containerd) or probe for filesystems this bed never uses are disabled.
 */
export function containerdConfigText(options: ContainerdConfigOptions): string {
  const cri = 'plugins."io.containerd.grpc.v1.cri"';
  return [
    'version = 2',
    `root = ${toml(options.root)}`,
    `state = ${toml(options.state)}`,
    'disabled_plugins = [',
    '  "io.containerd.internal.v1.opt",',
    '  "io.containerd.snapshotter.v1.aufs",',
    '  "io.containerd.snapshotter.v1.btrfs",',
    '  "io.containerd.snapshotter.v1.devmapper",',
    '  "io.containerd.snapshotter.v1.zfs",',
    '  "io.containerd.tracing.processor.v1.otlp",',
    ']',
    '',
    '[grpc]',
    `  address = ${toml(options.address)}`,
    '',
    `[${cri}]`,
    `  sandbox_image = ${toml(options.sandboxImage)}`,
    // Pod network namespaces under <state>/netns instead of the host-wide /var/run/netns: a stop (or the cleanup
    // after a crash) unmounts everything under the node's dir and knows it touches nothing of anyone else's.
    '  netns_mounts_under_state_dir = true',
    '  # the CRI streaming server (exec, attach, port-forward) on loopback, a random port',
    '  stream_server_address = "127.0.0.1"',
    '  stream_server_port = "0"',
    ...(options.restrictOomScoreAdj ? ['  # no CAP_SYS_RESOURCE here: never ask runc for an oom_score_adj below our own', '  restrict_oom_score_adj = true'] : []),
    '',
    `  [${cri}.containerd]`,
    '    snapshotter = "overlayfs"',
    '    default_runtime_name = "runc"',
    '',
    `  [${cri}.containerd.runtimes.runc]`,
    '    runtime_type = "io.containerd.runc.v2"',
    '',
    `  [${cri}.containerd.runtimes.runc.options]`,
    // cgroupfs, like the kubelet (cgroup v1, and no systemd to ask for scopes).
    '    SystemdCgroup = false',
    `    Root = ${toml(options.runcRoot)}`,
    '',
    `  [${cri}.cni]`,
    `    bin_dir = ${toml(options.cniBinDir)}`,
    `    conf_dir = ${toml(options.cniConfDir)}`,
    '    max_conf_num = 1',
    '',
  ].join('\n');
}

export interface ContainerdOptions extends ServerStartOptions {
  sandboxImage: string;
  cniBinDir: string;
  cniConfDir: string;
  restrictOomScoreAdj?: boolean;
}

export interface ContainerdHandle extends ServerControl, ContainerdPaths {
  configPath: string;
  /** Runs `ctr --address <socket> --namespace k8s.io <args>` and returns its stdout; a non-zero exit throws. */
  ctr(args: readonly string[], options?: { namespace?: string; timeoutMs?: number }): Promise<string>;
}

/** Starts containerd on its own socket, ready once `ctr version` answers and the CRI plugin loaded. */
export async function startContainerd(options: ContainerdOptions): Promise<ContainerdHandle> {
  const { dir } = options;
  const binary = options.binary ?? (await whichBinary('containerd', "install Debian's containerd package (apt-get install containerd)", options.env));
  const ctrBinary = await whichBinary('ctr', "install Debian's containerd package, which ships ctr", options.env);
  const paths = containerdPaths(dir);
  if (Buffer.byteLength(paths.address) > MAX_SOCKET_PATH) {
    // containerd would fail with "bind: invalid argument".
    throw new TestbedError(`containerd's socket ${paths.address} is longer than a unix socket path may be (${MAX_SOCKET_PATH} bytes here): use a shorter dir`);
  }
  await mkdir(dir, { recursive: true });
  const configPath = join(dir, 'config.toml');
  await writeFile(configPath, containerdConfigText({
      ...paths,
      sandboxImage: options.sandboxImage,
      cniBinDir: options.cniBinDir,
      cniConfDir: options.cniConfDir,
      restrictOomScoreAdj: options.restrictOomScoreAdj,
    }),
  );

  const ctr = async (args: readonly string[], opts: { namespace?: string; timeoutMs?: number } = {}): Promise<string> =>
    run(ctrBinary, ['--address', paths.address, '--namespace', opts.namespace ?? CRI_NAMESPACE, ...args], { timeoutMs: opts.timeoutMs });

  const server = new ServerProcess({
    name: 'containerd',
    binary,
    dir,
    logFileName: 'containerd.log',
    args: ['--config', configPath],
    probe: async () => (await tryRun(ctrBinary, ['--address', paths.address, 'version'], { timeoutMs: 5_000 })).code === 0,
    readyTimeoutMs: 30_000,
    // containerd stops its plugins and exits in about a second; running containers and their shims stay.
    stopTimeoutMs: 15_000,
    logger: options.logger,
  });
  const start = async (signal?: AbortSignal): Promise<void> => {
    await server.start(signal);
    // containerd serves without a plugin that failed to load; without CRI the kubelet would only say "unimplemented".
    const plugins = await ctr(['plugins', 'ls']);
    const criLine = plugins.split('\n').find((line) => /^io\.containerd\.grpc\.v1\s+cri\s/.test(line));
    if (!criLine || !/\sok\s*$/.test(criLine)) {
      await server.stop();
      throw new TestbedError(`containerd's CRI plugin did not load (${criLine?.trim() ?? 'not listed'}); see ${server.logFile}`);
    }
  };
  await start(options.signal);
  return {
    ...serverControl(server),
    start,
    ...paths,
    configPath,
    ctr,
  };
}
