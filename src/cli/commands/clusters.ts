import { readmitCluster, removeCluster, type RemovalBuckets } from '../../hub/cluster-removal.js';
import { UsageError } from '../../errors.js';
import { Buckets, connectNats, openBucket, type NatsLink } from '../../transport/index.js';
import type { Command, CommandContext } from '../command.js';
import { natsOptions, requiredNatsConfig } from './nats-flags.js';

/** The one cluster a subcommand names. */
function clusterArgument(ctx: CommandContext, command: string): string {
  const [cluster, ...rest] = ctx.positionals;
  if (cluster === undefined || rest.length > 0) throw new UsageError(`name one cluster: ctrlmesh clusters ${command} CLUSTER`);
  return cluster;
}

/** Runs `act` on the hub's buckets, over a connection with the hub's NATS identity (only it may write them). */
async function withHubBuckets<T>(ctx: CommandContext, act: (buckets: RemovalBuckets) => Promise<T>): Promise<T> {
  const link: NatsLink = await connectNats({ config: requiredNatsConfig(ctx), name: 'ctrlmesh-clusters', logger: ctx.logger });
  try {
    return await act({ clusters: await openBucket(link.js, Buckets.clusters), state: await openBucket(link.js, Buckets.state) });
  } finally {
    await link.close();
  }
}

const removeCommand: Command = {
  name: 'remove',
  summary: 'Remove a member cluster from the fleet: plan without it and refuse its registrations.',
  usage: 'CLUSTER --nats URL --nats-creds HUB_CREDS [NATS options]',
  details: [
    "Needs the hub's NATS identity (hub.creds of `ctrlmesh nats-auth init`): only it writes the hub's buckets.",
    "The hub leader plans without the cluster at once: its shards' units are handed over, its own units leave every",
    "operator's span. Its agent's registrations are refused, with its token or its own identity, until readmitted.",
    "Take its line out of the hub's token file too, and stop its agent.",
  ].join('\n'),
  options: natsOptions,
  run: async (ctx) => {
    const cluster = clusterArgument(ctx, 'remove');
    const removed = await withHubBuckets(ctx, (buckets) => removeCluster(buckets, cluster, new Date()));
    if (!removed) throw new UsageError(`cluster "${cluster}" is not registered (ctrlmesh status lists the clusters)`);
    ctx.stdout.write(`cluster ${cluster} removed: the hub plans without it and refuses its registrations (ctrlmesh clusters readmit ${cluster} undoes this)\n`);
    return 0;
  },
};

const readmitCommand: Command = {
  name: 'readmit',
  summary: 'Let a removed cluster register again.',
  usage: 'CLUSTER --nats URL --nats-creds HUB_CREDS [NATS options]',
  details: 'Its agent registers again on its next start, with its bootstrap token (the hub\'s token file needs its line).',
  options: natsOptions,
  run: async (ctx) => {
    const cluster = clusterArgument(ctx, 'readmit');
    const readmitted = await withHubBuckets(ctx, (buckets) => readmitCluster(buckets, cluster));
    if (!readmitted) throw new UsageError(`cluster "${cluster}" was not removed`);
    ctx.stdout.write(`cluster ${cluster} readmitted: its agent registers it again on its next start\n`);
    return 0;
  },
};

export const clustersCommand: Command = {
  name: 'clusters',
  summary: 'Remove member clusters from the fleet, or readmit them.',
  usage: '<remove|readmit> CLUSTER [NATS options]',
  options: {},
  run: async () => 2,
  subcommands: [removeCommand, readmitCommand],
};
