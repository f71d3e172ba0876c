import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { formatDuration } from '../../api/index.js';
import { HUB_DEFAULTS, HubOptionsSchema, isLoopbackHost, parseHubOptions, startHub, type HubOptions } from '../../hub/index.js';
import { UsageError } from '../../errors.js';
import { durationValue, intValue, requiredString, stringValue, usableOptions, type Command } from '../command.js';
import { decodeJwt } from '../../transport/auth/index.js';
import { credsJwt, type NatsClientConfig } from '../../transport/index.js';
import { hashAlgorithmFlag, hashAlgorithmValue, parseListen, readBootstrapTokens, readFlagFile, readOperatorFile, untilAborted } from './flags.js';
import { natsOptions, requiredNatsConfig } from './nats-flags.js';

/** An nkey seed named by a flag (or its environment variable), checked for its kind (e.g. SN: a server key). */
function seedFile(ctx: Parameters<Command['run']>[0], flag: string, env: string, prefix: string): string {
  const path = stringValue(ctx, flag) ?? ctx.env[env];
  if (!path) throw new UsageError(`--${flag} is required (or ${env})`);
  const seed = readFlagFile(flag, path).trim();
  if (!seed.startsWith(prefix) || seed.length !== 58) throw new UsageError(`--${flag} ${path} is not an nkey seed starting with ${prefix}`);
  return seed;
}

/** The agent issuer: its seed, and the account it mints for, read from the hub's own user JWT. */
function agentIssuer(ctx: Parameters<Command['run']>[0], nats: NatsClientConfig): Pick<HubOptions, 'agentIssuer'> | undefined {
  if (!stringValue(ctx, 'agent-issuer') && !ctx.env.CTRLMESH_AGENT_ISSUER) return undefined;
  const seed = seedFile(ctx, 'agent-issuer', 'CTRLMESH_AGENT_ISSUER', 'SA');
  if (nats.credentials?.kind !== 'creds') throw new UsageError('--agent-issuer needs --nats-creds: agents join the account of the hub\'s own user');
  const claims = decodeJwt(credsJwt(nats.credentials.file));
  return { agentIssuer: { seed, account: claims.issuerAccount } };
}

/** Where /status listens when --listen is beyond loopback and --status-listen is not given. */
const STATUS_LISTEN_DEFAULT = '127.0.0.1:9465';

/** /status on a listener of its own when asked for, or when --listen is reachable from elsewhere. */
function statusListenOption(listen: HubOptions['listen'], flag: string | undefined): Pick<HubOptions, 'statusListen'> {
  if (flag !== undefined) {
    const statusListen = parseListen('status-listen', flag);
    return statusListen.host === listen.host && statusListen.port === listen.port ? {} : { statusListen };
  }
  return isLoopbackHost(listen.host) ? {} : { statusListen: parseListen('status-listen', STATUS_LISTEN_DEFAULT) };
}

export const hubCommand: Command = {
  name: 'hub',
  summary: 'Run the hub: cluster registry, health, planning and route tables over NATS JetStream.',
  usage: '--nats URL --token-file FILE --signing-key FILE [--agent-issuer FILE] [NATS options] [options]',
  details: [
    'Run two or more hubs against the same NATS: one leads (a lease in KV), the others stand by.',
    'The token file holds the bootstrap tokens agents must present, one "CLUSTER TOKEN" line each: a token',
    'registers that cluster only. --signing-key is the nkey seed that signs route tables (proxies trust its',
    'public key); with --agent-issuer (the account signing key; needs --nats-creds) the hub mints each agent an',
    'identity for its cluster alone. `ctrlmesh nats-auth init` writes all of these.',
    "With --operator-file, a cluster's ShardingConfigs count only for the operators listed with it: no member",
    "cluster can join or take over another's operator by naming it (docs/control-plane.md).",
    'Serves /healthz, /readyz and /metrics on --listen, and /status (JSON: clusters, API servers, operators; see',
    '`ctrlmesh status`) on --status-listen: by default on --listen when that is a loopback address, else on',
    `${STATUS_LISTEN_DEFAULT}, which \`kubectl port-forward\` reaches in a pod. Beyond loopback /status needs`,
    '--status-token-file, and answers 401 without its bearer token.',
  ].join('\n'),
  options: {
    ...natsOptions,
    'token-file': { type: 'string', valueName: 'FILE', description: 'bootstrap tokens, one "CLUSTER TOKEN" line each' },
    'operator-file': {
      type: 'string',
      valueName: 'FILE',
      description: 'operators this hub plans, one "NAMESPACE/NAME CLUSTER,..." line each: only those clusters may define and span it (default: any cluster, any operator)',
    },
    'signing-key': { type: 'string', valueName: 'FILE', description: 'nkey seed that signs route tables [$CTRLMESH_SIGNING_KEY]' },
    'agent-issuer': { type: 'string', valueName: 'FILE', description: "account signing key seed: mint agents' identities [$CTRLMESH_AGENT_ISSUER]" },
    replicas: { type: 'string', valueName: 'N', description: 'KV replicas of new buckets: 1 on one NATS server, 3 on a cluster (default auto: up to 3, as the cluster allows)' },
    listen: { type: 'string', valueName: 'HOST:PORT', description: `/healthz /readyz /metrics address (default ${HUB_DEFAULTS.listen.host}:${HUB_DEFAULTS.listen.port})` },
    'status-listen': {
      type: 'string',
      valueName: 'HOST:PORT',
      description: `/status address (default: --listen when it is a loopback address, else ${STATUS_LISTEN_DEFAULT})`,
    },
    'status-token-file': { type: 'string', valueName: 'FILE', description: 'bearer token /status requires (first line); needed when /status listens beyond loopback' },
    identity: { type: 'string', valueName: 'ID', description: 'name of this hub instance (default host name + random suffix)' },
    'lease-ttl': { type: 'string', valueName: 'DURATION', description: `hub leader lease (default ${formatDuration(HUB_DEFAULTS.leaseTtlMs)}; renewed every third of it)` },
    'unknown-after': {
      type: 'string',
      valueName: 'DURATION',
      description: `a cluster without heartbeats is Unknown after (default ${formatDuration(HUB_DEFAULTS.health.unknownAfterMs)})`,
    },
    'offline-after': { type: 'string', valueName: 'DURATION', description: `... and Offline after (default ${formatDuration(HUB_DEFAULTS.health.offlineAfterMs)})` },
    'proxy-lease': {
      type: 'string',
      valueName: 'DURATION',
      description: `proxies fence themselves this long after their last lease renewal, whole seconds (default ${formatDuration(HUB_DEFAULTS.proxyLeaseSeconds * 1000)})`,
    },
    'hash-algorithm': hashAlgorithmFlag(': reports of agents that hash otherwise are dropped (default: the first cluster\'s by name, which any member cluster can set)'),
    'agent-identity-ttl': {
      type: 'string',
      valueName: 'DURATION',
      description: `how long an identity minted for an agent is valid; agents renew it halfway (default ${formatDuration(HUB_DEFAULTS.agentIdentityTtlMs)})`,
    },
    'move-units-of-offline-clusters': {
      type: 'boolean',
      description: "an Offline cluster's shards hand their units to the operator's shards elsewhere (multicluster failover; default: they keep them)",
    },
    'grant-margin': {
      type: 'string',
      valueName: 'DURATION',
      description: `added to the proxy lease before a unit moves without acknowledgement (default ${formatDuration(HUB_DEFAULTS.grantMarginMs)})`,
    },
  },
  run: async (ctx) => {
    const field = HubOptionsSchema.properties;
    const leaseTtlMs = durationValue(ctx, 'lease-ttl', HUB_DEFAULTS.leaseTtlMs, field.leaseTtlMs);
    // The timing flags first: a mistyped duration is reported before a missing file.
    const timing = {
      leaseTtlMs,
      leaseRenewMs: Math.floor(leaseTtlMs / 3),
      health: {
        unknownAfterMs: durationValue(ctx, 'unknown-after', HUB_DEFAULTS.health.unknownAfterMs, field.health.properties.unknownAfterMs),
        offlineAfterMs: durationValue(ctx, 'offline-after', HUB_DEFAULTS.health.offlineAfterMs, field.health.properties.offlineAfterMs),
      },
      proxyLeaseSeconds: durationValue(ctx, 'proxy-lease', HUB_DEFAULTS.proxyLeaseSeconds, field.proxyLeaseSeconds, 's'),
      grantMarginMs: durationValue(ctx, 'grant-margin', HUB_DEFAULTS.grantMarginMs, field.grantMarginMs),
      agentIdentityTtlMs: durationValue(ctx, 'agent-identity-ttl', HUB_DEFAULTS.agentIdentityTtlMs, field.agentIdentityTtlMs),
    };
    const algorithm = hashAlgorithmValue(ctx);
    const listen = stringValue(ctx, 'listen');
    const listenAddress = listen ? parseListen('listen', listen) : HUB_DEFAULTS.listen;
    const statusListen = stringValue(ctx, 'status-listen');
    const statusTokenFile = stringValue(ctx, 'status-token-file');
    const operatorFile = stringValue(ctx, 'operator-file');
    const nats = requiredNatsConfig(ctx);
    const options = usableOptions(
      parseHubOptions({
        ...HUB_DEFAULTS,
        ...timing,
        nats,
        tokens: readBootstrapTokens(requiredString(ctx, 'token-file')),
        ...(operatorFile === undefined ? {} : { operators: readOperatorFile(operatorFile) }),
        signingSeed: seedFile(ctx, 'signing-key', 'CTRLMESH_SIGNING_KEY', 'SN'),
        ...(agentIssuer(ctx, nats) ?? {}),
        ...(algorithm === undefined ? {} : { hash: { algorithm } }),
        moveUnitsOfOfflineClusters: ctx.values['move-units-of-offline-clusters'] === true,
        identity: stringValue(ctx, 'identity') ?? `${hostname()}-${randomBytes(3).toString('hex')}`,
        replicas: (stringValue(ctx, 'replicas') ?? 'auto') === 'auto' ? 'auto' : intValue(ctx, 'replicas', 1, field.replicas.anyOf[0]),
        listen: listenAddress,
        ...statusListenOption(listenAddress, statusListen),
        ...(statusTokenFile === undefined ? {} : { statusToken: readFlagFile('status-token-file', statusTokenFile).split('\n')[0]?.trim() ?? '' }),
      }),
    );
    const hub = await startHub(options, { logger: ctx.logger });
    ctx.stdout.write(`hub ${hub.identity} serving ${hub.url}${hub.statusUrl === hub.url ? '' : `, /status on ${hub.statusUrl}`}\n`);
    await untilAborted(ctx.signal);
    await hub.stop({ releaseLease: true });
    return 0;
  },
};
