import { resolve } from 'node:path';
import {
  findTool,
  provisionTools,
  startTestbed,
  stopLeftovers,
  livePidRecords,
  recordOwner,
  TestbedError,
  type Testbed,
} from '../../dev/index.js';
import { intValue, stringValue, type Command, type CommandContext } from '../command.js';

const DEFAULT_DIR = '.ctrlmesh/dev';
const dirOption = {
  dir: { type: 'string', valueName: 'DIR', description: `the test bed's directory: data, certificates, logs, kubeconfigs (default ${DEFAULT_DIR})` },
} as const;

function bedDir(ctx: CommandContext): string {
  return resolve(stringValue(ctx, 'dir') ?? DEFAULT_DIR);
}

const toolsCommand: Command = {
  name: 'tools',
  summary: 'Find or build (once, into the cache) kube-apiserver, kubectl, etcd and nats-server; print their paths.',
  usage: '[options]',
  details:
    'Binaries are cached in ${XDG_CACHE_HOME:-~/.cache}/ctrlmesh/bin. CTRLMESH_KUBE_APISERVER, CTRLMESH_KUBECTL,\n' +
    'CTRLMESH_ETCD and CTRLMESH_NATS_SERVER name existing binaries; KUBEBUILDER_ASSETS is honoured too.',
  options: {},
  run: async (ctx) => {
    const tools = await provisionTools({ env: ctx.env, signal: ctx.signal, onProgress: (m) => ctx.logger.info(m) });
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

const upCommand: Command = {
  name: 'up',
  summary: 'Start local clusters (etcd + one kube-apiserver each) and NATS with JetStream; stop them on Ctrl-C.',
  usage: '[--clusters N] [--nats-servers N] [--dir DIR]',
  options: {
    clusters: { type: 'string', valueName: 'N', description: 'how many clusters, named cluster-a, cluster-b, ... (default 2)' },
    'nats-servers': {
      type: 'string',
      valueName: 'N',
      description: 'NATS servers: 1 (default), or 3 for a cluster whose JetStream buckets are replicated 3 times (up to 5)',
    },
    ...dirOption,
  },
  run: async (ctx) => {
    const clusters = intValue(ctx, 'clusters', 2, { min: 1, max: 26 });
    const natsServers = intValue(ctx, 'nats-servers', 1, { min: 1, max: 5 });
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
    try {
      const bed = await startTestbed({
        clusters,
        natsServers,
        dir,
        env: ctx.env,
        logger: ctx.logger,
        signal: ctx.signal,
        onProgress: (m) => ctx.logger.info(m),
      });
      try {
        const kubectl = (await findTool('kubectl', ctx.env))?.path ?? 'kubectl';
        ctx.stdout.write(describe(bed, (Date.now() - started) / 1000, kubectl));
        if (!ctx.signal.aborted) await new Promise((done) => ctx.signal.addEventListener('abort', done, { once: true }));
      } finally {
        ctx.logger.info('stopping the test bed');
        await bed.down();
        ctx.stdout.write('ctrlmesh test bed stopped\n');
      }
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
    if (stopped.length === 0) ctx.stdout.write(`nothing running in ${dir}\n`);
    for (const r of stopped) ctx.stdout.write(`stopped ${r.name} (pid ${r.pid})\n`);
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
