import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import {
  cleanupNodeLeftovers,
  describeCleanup,
  findTool,
  provisionTools,
  startNodeBed,
  startTestbed,
  stopLeftovers,
  type NodeBed,
  livePidRecords,
  recordOwner,
  DEFAULT_KUBE_VERSION,
  KUBE_VERSION_ENV,
  KUBE_VERSIONS,
  selectKubeVersion,
  TestbedError,
  type Testbed,
} from '../../dev/index.js';
import { UsageError } from '../../errors.js';
import { intValue, stringValue, type Command, type CommandContext } from '../command.js';

const DEFAULT_DIR = '.ctrlmesh/dev';
const dirOption = {
  dir: { type: 'string', valueName: 'DIR', description: `the test bed's directory: data, certificates, logs, kubeconfigs (default ${DEFAULT_DIR})` },
} as const;

function bedDir(ctx: CommandContext): string {
  return resolve(stringValue(ctx, 'dir') ?? DEFAULT_DIR);
}

const nodeOption = {
  node: {
    type: 'boolean',
    description: 'also a real node: kubelet, kube-proxy, kube-scheduler, kube-controller-manager, sample-controller (needs root, containerd, runc)',
  },
} as const;

const kubeVersionOption = {
  'kube-version': {
    type: 'string',
    valueName: 'VERSION',
    description:
      `kube-apiserver's Kubernetes minor: ${KUBE_VERSIONS.map((k) => `${k.minor} (${k.version})`).join(' or ')}; ` +
      `default $${KUBE_VERSION_ENV}, else ${DEFAULT_KUBE_VERSION.minor}. kubectl stays ${DEFAULT_KUBE_VERSION.minor}`,
  },
} as const;

/** --kube-version, else CTRLMESH_KUBE_VERSION, else the default; an unknown one is a usage error (exit 2). */
function kubeVersion(ctx: CommandContext): ReturnType<typeof selectKubeVersion> {
  return selectKubeVersion(stringValue(ctx, 'kube-version'), ctx.env);
}

const toolsCommand: Command = {
  name: 'tools',
  summary: 'Find or build (once, into the cache) kube-apiserver, kubectl, etcd, nats-server and helm; print their paths.',
  usage: '[--node] [--kube-version VERSION]',
  details:
    'Binaries are cached in ${XDG_CACHE_HOME:-~/.cache}/ctrlmesh/bin. CTRLMESH_KUBE_APISERVER, CTRLMESH_KUBECTL,\n' +
    'CTRLMESH_ETCD and CTRLMESH_NATS_SERVER name existing binaries; KUBEBUILDER_ASSETS is honoured too.\n' +
    'With --kube-version v1.37: its kube-apiserver (CTRLMESH_KUBE_APISERVER_V1_37 names an existing one).',
  options: { ...nodeOption, ...kubeVersionOption },
  run: async (ctx) => {
    const node = ctx.values.node === true;
    const tools = await provisionTools({ env: ctx.env, signal: ctx.signal, onProgress: (m) => ctx.logger.info(m), node, kubeVersion: kubeVersion(ctx) });
    for (const t of tools) ctx.stdout.write(`${t.name.padEnd(16)}${t.version.padEnd(10)}${t.path}  (${t.source})\n`);
    return 0;
  },
};

function describe(bed: Testbed, seconds: number, kubectl: string): string {
  const lines = [`ctrlmesh test bed ready in ${seconds.toFixed(1)} s (dir ${bed.dir})`];
  for (const c of bed.clusters) lines.push(`  ${c.name.padEnd(12)}${c.server.padEnd(26)}kubeconfig ${c.kubeconfigPath}`);
  lines.push(`  ${'all'.padEnd(12)}${''.padEnd(26)}kubeconfig ${bed.info.kubeconfigPath} (one context per cluster)`);
  const natsServers = 'servers' in bed.nats ? bed.nats.servers : [{ name: 'nats', ...bed.nats }];
  for (const [i, s] of natsServers.entries()) {
    const label = natsServers.length === 1 ? 'nats' : `nats-${i + 1}`;
    lines.push(`  ${label.padEnd(12)}${s.url.padEnd(26)}JetStream; monitoring ${s.monitorUrl}`);
  }
  if (natsServers.length > 1) {
    lines.push(`  ${''.padEnd(12)}${''.padEnd(26)}one cluster: give clients every URL (--nats ${bed.nats.urls.join(',')})`);
  }
  const security = bed.nats.security;
  if (security) {
    const { auth } = security;
    lines.push(`  ${''.padEnd(12)}${''.padEnd(26)}TLS CA ${security.caFile}; identities in ${auth.dir}:`);
    lines.push(`  ${''.padEnd(38)}hub.creds, bootstrap.creds, issuer.nk, route-signing.nk (public key ${auth.routeSigningPublicKey})`);
  }
  lines.push(`  ${'etcd'.padEnd(12)}${bed.etcd.url}`);
  const first = bed.clusters[0];
  if (first) lines.push('', `Try: ${kubectl} --kubeconfig ${first.kubeconfigPath} get namespaces`);
  lines.push(`Stop with Ctrl-C (or \`ctrlmesh dev down --dir ${bed.dir}\` from another shell).`, '');
  return lines.join('\n');
}

function describeNodeBed(bed: NodeBed, seconds: number, kubectl: string): string {
  const { info } = bed;
  const s = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
  return [
    `ctrlmesh on a real node ready in ${seconds.toFixed(1)} s (dir ${info.dir})`,
    `  ${info.cluster.name.padEnd(12)}${info.cluster.server.padEnd(26)}kubeconfig ${info.cluster.kubeconfigPath}`,
    `  ${'node'.padEnd(12)}${info.node.name} at ${info.node.address}; containerd ${info.node.containerdAddress}`,
    `  ${'mesh'.padEnd(12)}namespace ${info.mesh.namespace}: NATS (JetStream) at ${info.mesh.natsUrl}, hub x2, agent (webhooks, injection)`,
    `  ${''.padEnd(12)}identities and helm values in ${info.dir}/mesh; route-signing key ${info.mesh.auth.routeSigningPublicKey}`,
    `  ${'images'.padEnd(12)}${Object.values(info.images).join(', ')}`,
    `  ${'timings'.padEnd(12)}builds ${s(info.timings.buildMs)}, node Ready ${s(info.timings.nodeReadyMs)}, mesh Ready ${s(info.timings.meshReadyMs)}`,
    '',
    `Try: ${kubectl} --kubeconfig ${info.cluster.kubeconfigPath} get pods -A`,
    'Label an operator\'s pods ctrlmesh.kusionstack.io/enable-proxy=true, with a ShardingConfig selecting them and the',
    'proxy Secret in their namespace (docs/install.md), and the agent injects the proxy sidecar.',
    `Stop with Ctrl-C (or \`ctrlmesh dev down --dir ${info.dir}\` from another shell).`,
    '',
  ].join('\n');
}

/** Waits for Ctrl-C (or `dev down`), then stops the bed. */
async function serveUntilStopped(ctx: CommandContext, down: () => Promise<void>, description: () => Promise<string>): Promise<void> {
  try {
    ctx.stdout.write(await description());
    if (!ctx.signal.aborted) await new Promise((done) => ctx.signal.addEventListener('abort', done, { once: true }));
  } finally {
    ctx.logger.info('stopping the test bed');
    await down();
    ctx.stdout.write('ctrlmesh test bed stopped\n');
  }
}

const upCommand: Command = {
  name: 'up',
  summary: 'Start local clusters (etcd + one kube-apiserver each) and NATS with JetStream; stop them on Ctrl-C.',
  usage: '[--clusters N] [--nats-servers N] [--kube-version VERSION] [--dir DIR] | --node [--dir DIR]',
  details: [
    'With --node: one cluster with a real node instead (containerd and runc from Debian, kubelet, kube-proxy,',
    'kube-scheduler and kube-controller-manager from the pinned Kubernetes module; root only), the project\'s images',
    'built here and imported into containerd, and NATS, the hub and the agent installed into it with helm.',
    `--kube-version v1.37 runs that minor's kube-apiserver with its ShardedListAndWatch feature gate on (not with --node).`,
  ].join('\n'),
  options: {
    ...nodeOption,
    ...kubeVersionOption,
    clusters: { type: 'string', valueName: 'N', description: 'how many clusters, named cluster-a, cluster-b, ... (default 2)' },
    'nats-servers': {
      type: 'string',
      valueName: 'N',
      description: 'NATS servers: 1 (default), or 3 for a cluster whose JetStream buckets are replicated 3 times (up to 5)',
    },
    ...dirOption,
  },
  run: async (ctx) => {
    const clusters = intValue(ctx, 'clusters', 2, { minimum: 1, maximum: 26 });
    const natsServers = intValue(ctx, 'nats-servers', 1, { minimum: 1, maximum: 5 });
    const kube = kubeVersion(ctx);
    if (ctx.values.node === true && kube !== DEFAULT_KUBE_VERSION) {
      // The node's kubelet and controllers are the default minor's; a newer API server would put them out of skew.
      throw new UsageError(`--node runs Kubernetes ${DEFAULT_KUBE_VERSION.minor} only; drop --kube-version ${kube.minor} (or unset ${KUBE_VERSION_ENV})`);
    }
    const dir = bedDir(ctx);
    const running = await livePidRecords(dir);
    if (running.length > 0) {
      throw new TestbedError(
        `a test bed already runs in ${dir} (${running.map((r) => `${r.name} pid ${r.pid}`).join(', ')}): stop it with \`ctrlmesh dev down --dir ${dir}\``,
      );
    }
    const started = Date.now();
    // `ctrlmesh dev down` from another shell finds this process and asks it to stop the bed in order.
    const forgetOwner = await recordOwner(dir, 'ctrlmesh dev up');
    const kubectl = async (): Promise<string> => (await findTool('kubectl', ctx.env))?.path ?? 'kubectl';
    try {
      if (ctx.values.node === true) {
        if (ctx.values.clusters !== undefined || ctx.values['nats-servers'] !== undefined) {
          throw new UsageError('--node starts one cluster with one NATS server in it: drop --clusters and --nats-servers');
        }
        const bed = await startNodeBed({ dir, env: ctx.env, logger: ctx.logger, signal: ctx.signal, onProgress: (m) => ctx.logger.info(m) });
        await serveUntilStopped(ctx, () => bed.down(), async () => describeNodeBed(bed, (Date.now() - started) / 1000, await kubectl()));
        return 0;
      }
      const bed = await startTestbed({
        clusters,
        natsServers,
        kubeVersion: kube,
        dir,
        env: ctx.env,
        logger: ctx.logger,
        signal: ctx.signal,
        onProgress: (m) => ctx.logger.info(m),
      });
      await serveUntilStopped(ctx, () => bed.down(), async () => describe(bed, (Date.now() - started) / 1000, await kubectl()));
    } finally {
      await forgetOwner();
    }
    return 0;
  },
};

const downCommand: Command = {
  name: 'down',
  summary: 'Stop the servers a test bed left running in its directory (e.g. after its `dev up` was killed).',
  usage: '[--dir DIR]',
  options: { ...dirOption },
  run: async (ctx) => {
    const dir = bedDir(ctx);
    const stopped = await stopLeftovers(dir);
    // A real node leaves containers, shims, mounts and rules behind its daemons.
    const node = existsSync(join(dir, 'node')) ? describeCleanup(await cleanupNodeLeftovers(join(dir, 'node'))) : undefined;
    if (stopped.length === 0 && !node) ctx.stdout.write(`nothing running in ${dir}\n`);
    for (const r of stopped) ctx.stdout.write(`stopped ${r.name} (pid ${r.pid})\n`);
    if (node) ctx.stdout.write(`removed what the node left: ${node}\n`);
    return 0;
  },
};

export const devCommand: Command = {
  name: 'dev',
  summary: 'Local development: the test servers (tools) and a local test bed (up, down).',
  usage: 'COMMAND [options]',
  options: {},
  subcommands: [toolsCommand, upCommand, downCommand],
  run: async () => 2,
};
