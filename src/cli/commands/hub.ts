import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { HUB_DEFAULTS, hubOptionProblems, startHub, type HubOptions } from '../../hub/index.js';
import { UsageError } from '../../errors.js';
import { intValue, requiredString, stringValue, type Command } from '../command.js';
import { parseListen, readTokens, untilAborted } from './flags.js';

export const hubCommand: Command = {
  name: 'hub',
  summary: 'Run the hub: cluster registry, health, planning and route tables over NATS JetStream.',
  usage: '--nats URL --token-file FILE [options]',
  details: [
    'Run two or more hubs against the same NATS: one leads (a lease in KV), the others stand by.',
    'The token file holds the bootstrap tokens agents must present, one per line.',
    'Serves /healthz, /readyz, /metrics and /status (JSON; see `ctrlmesh status`).',
  ].join('\n'),
  options: {
    nats: { type: 'string', valueName: 'URL', description: 'NATS server URL (comma-separated for several)' },
    'token-file': { type: 'string', valueName: 'FILE', description: 'bootstrap tokens agents must present, one per line' },
    replicas: { type: 'string', valueName: 'N', description: `KV replicas: 1 on one NATS server, 3 on a cluster (default ${HUB_DEFAULTS.replicas})` },
    listen: { type: 'string', valueName: 'HOST:PORT', description: `status API address (default ${HUB_DEFAULTS.listen.host}:${HUB_DEFAULTS.listen.port})` },
    identity: { type: 'string', valueName: 'ID', description: 'name of this hub instance (default host name + random suffix)' },
    'lease-ttl': { type: 'string', valueName: 'SECONDS', description: `hub leader lease (default ${HUB_DEFAULTS.leaseTtlMs / 1000})` },
    'unknown-after': { type: 'string', valueName: 'SECONDS', description: `a cluster without heartbeats is Unknown after (default ${HUB_DEFAULTS.health.unknownAfterMs / 1000})` },
    'offline-after': { type: 'string', valueName: 'SECONDS', description: `... and Offline after (default ${HUB_DEFAULTS.health.offlineAfterMs / 1000})` },
    'proxy-lease': { type: 'string', valueName: 'SECONDS', description: `proxies fence themselves after this long without NATS (default ${HUB_DEFAULTS.proxyLeaseSeconds})` },
  },
  run: async (ctx) => {
    const leaseTtl = intValue(ctx, 'lease-ttl', HUB_DEFAULTS.leaseTtlMs / 1000, { min: 2, max: 600 });
    const listen = stringValue(ctx, 'listen');
    const options: HubOptions = {
      ...HUB_DEFAULTS,
      nats: requiredString(ctx, 'nats').split(','),
      tokens: readTokens(requiredString(ctx, 'token-file')),
      identity: stringValue(ctx, 'identity') ?? `${hostname()}-${randomBytes(3).toString('hex')}`,
      replicas: intValue(ctx, 'replicas', HUB_DEFAULTS.replicas, { min: 1, max: 5 }),
      leaseTtlMs: leaseTtl * 1000,
      leaseRenewMs: Math.floor((leaseTtl * 1000) / 3),
      health: {
        unknownAfterMs: intValue(ctx, 'unknown-after', HUB_DEFAULTS.health.unknownAfterMs / 1000, { min: 1, max: 3600 }) * 1000,
        offlineAfterMs: intValue(ctx, 'offline-after', HUB_DEFAULTS.health.offlineAfterMs / 1000, { min: 2, max: 86400 }) * 1000,
      },
      proxyLeaseSeconds: intValue(ctx, 'proxy-lease', HUB_DEFAULTS.proxyLeaseSeconds, { min: 1, max: 3600 }),
      listen: listen ? parseListen('listen', listen) : HUB_DEFAULTS.listen,
    };
    const problems = hubOptionProblems(options);
    if (problems.length) throw new UsageError(problems.join('; '));
    const hub = await startHub(options, { logger: ctx.logger });
    ctx.stdout.write(`hub ${hub.identity} serving ${hub.url}\n`);
    await untilAborted(ctx.signal);
    await hub.stop({ releaseLease: true });
    return 0;
  },
};
