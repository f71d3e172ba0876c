import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { join } from 'node:path';
import { UsageError } from '../../errors.js';
import type { RunningProxy } from '../../proxy/index.js';
import { durationValue, stringValue, type Command, type CommandContext } from '../command.js';
import { PROXY_OPTIONS, startProxyFromFlags } from './proxy.js';

/** The placeholder an operator's argument may carry for the kubeconfig's path (for operators that read only a flag). */
const KUBECONFIG_PLACEHOLDER = '{kubeconfig}';
const PROGRESS_EVERY_MS = 5_000;
/** How long the operator has to stop after SIGTERM before it is killed. */
const STOP_GRACE_MS = 30_000;
const ANY_PORT = { host: '127.0.0.1', port: 0 };

/** Where a shard's files go by default: `.ctrlmesh/run/<shard>` (a shard name's `/` becomes `_`). */
function shardDir(shard: string): string {
  return join('.ctrlmesh', 'run', shard.replace(/[^A-Za-z0-9._-]/gu, '_'));
}

/** Waits until the proxy serves its shard (a table, and a lease the hub extended), saying every few seconds why not. */
async function untilServing(ctx: CommandContext, proxy: RunningProxy, timeoutMs: number | undefined): Promise<void> {
  const started = performance.now();
  let said = started;
  while (!proxy.controller.readiness().ready) {
    if (ctx.signal.aborted) throw new UsageError('stopped before the proxy had its route table');
    const now = performance.now();
    if (timeoutMs !== undefined && now - started > timeoutMs) {
      throw new UsageError(`the proxy did not get its route table within ${Math.round(timeoutMs / 1000)} s: ${proxy.controller.readiness().reasons.join('; ')}`);
    }
    if (now - said >= PROGRESS_EVERY_MS) {
      said = now;
      ctx.stderr.write(`waiting for the shard's route table (${Math.round((now - started) / 1000)} s): ${proxy.controller.readiness().reasons.join('; ')}\n`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export const runCommand: Command = {
  name: 'run',
  summary: 'Run one shard here: its proxy, then the operator through it; both stop together.',
  usage: '--nats URL --route-signer KEY --operator NS/NAME --shard NAME --credentials KUBECONFIG [proxy flags] -- OPERATOR [ARG]...',
  details:
    "Starts the shard's proxy (any `ctrlmesh proxy` flag applies; --listen and --ops-listen default to free ports on\n" +
    "127.0.0.1), waits until it serves the shard (its route table, and a lease the hub extended), writes the operator's\n" +
    'kubeconfig (--write-kubeconfig, default .ctrlmesh/run/<shard>/kubeconfig) and starts OPERATOR with KUBECONFIG set\n' +
    `to it; an argument ${KUBECONFIG_PLACEHOLDER} is replaced by its path. Ctrl-C or SIGTERM stops the operator (SIGTERM, then\n` +
    'SIGKILL after 30 s), then the proxy; when the operator exits, the proxy stops and its exit code is returned.\n' +
    "Shard names are the hub's: `<cluster>/<prefix>-<n>-normal` (`ctrlmesh status` lists them). An operator on\n" +
    'controller-runtime elects its leader in its own namespace: give it --leader-election-namespace (out of a cluster it\n' +
    "cannot find one), and the ShardingConfig's spec.controller.leaderElectionName its lock's name.",
  options: {
    ...PROXY_OPTIONS,
    'ready-timeout': { type: 'string', valueName: 'DURATION', description: 'give up when the proxy has no route table by then (default: wait, saying why every 5s)' },
  },
  run: async (ctx) => {
    const [program, ...args] = ctx.positionals;
    if (program === undefined) throw new UsageError(`name the operator after --: ctrlmesh run ... -- ./manager --leader-election-namespace NS`);
    const shard = stringValue(ctx, 'shard') ?? 'shard';
    const kubeconfigPath = stringValue(ctx, 'write-kubeconfig') ?? join(shardDir(shard), 'kubeconfig');
    const readyTimeout = stringValue(ctx, 'ready-timeout') === undefined ? undefined : durationValue(ctx, 'ready-timeout', 0, { minimum: 1, maximum: 86_400_000 });
    const proxy = await startProxyFromFlags(ctx, { listeners: { api: ANY_PORT, ops: ANY_PORT }, kubeconfigPath, storePath: join(shardDir(shard), 'route-table.json') });
    try {
      ctx.stderr.write(`proxy of shard ${shard} listening on ${proxy.apiUrl} (ops ${proxy.opsUrl})\n`);
      await untilServing(ctx, proxy, readyTimeout);
      ctx.stderr.write(`shard ${shard} served; starting ${program} with KUBECONFIG=${kubeconfigPath}\n`);
      const child = spawn(
        program,
        args.map((arg) => arg.split(KUBECONFIG_PLACEHOLDER).join(kubeconfigPath)),
        { stdio: 'inherit', env: { ...ctx.env, KUBECONFIG: kubeconfigPath } },
      );
      const exited = new Promise<number>((resolve, reject) => {
        child.once('error', (err) => reject(new UsageError(`cannot start ${program}: ${err.message}`)));
        child.once('exit', (code, signal) => resolve(code ?? 128 + (signal === null ? 0 : constants.signals[signal])));
      });
      const stop = (): void => {
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS).unref();
      };
      ctx.signal.addEventListener('abort', stop, { once: true });
      const code = await exited;
      ctx.signal.removeEventListener('abort', stop);
      ctx.stderr.write(`${program} exited with code ${code}; stopping the proxy\n`);
      return code;
    } finally {
      await proxy.close();
    }
  },
};
