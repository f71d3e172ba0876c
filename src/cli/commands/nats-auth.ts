import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { clusterNameProblem } from '../../api/index.js';
import { UsageError } from '../../errors.js';
import { createAuthSetup, readAuthFiles, writeAuthSetup, writeRoleCreds, type Role } from '../../transport/auth/index.js';
import { requiredString, stringValue, type Command, type CommandContext } from '../command.js';

const ROLES = ['hub', 'bootstrap', 'agent', 'proxy'] as const;

const initCommand: Command = {
  name: 'init',
  summary: 'Create the operator, accounts and keys of a NATS server for ControllerMesh (decentralized JWT auth).',
  usage: '--dir DIR',
  details: [
    'Writes into DIR: resolver.conf (include it in nats-server.conf: operator, system account, the ControllerMesh',
    'account with JetStream), hub.creds and bootstrap.creds, issuer.nk (the account signing key: the hub\'s',
    '--agent-issuer), route-signing.nk (the hub\'s --signing-key) and route-signing.pub (the proxies\'',
    '--route-signer). Seeds and creds are written mode 0600; keep DIR out of version control.',
  ].join('\n'),
  options: { dir: { type: 'string', valueName: 'DIR', description: 'where to write (must not hold a setup already)' } },
  run: async (ctx) => {
    const dir = resolve(requiredString(ctx, 'dir'));
    if (existsSync(`${dir}/resolver.conf`)) throw new UsageError(`${dir} already holds a NATS auth setup; remove it or choose another --dir`);
    const files = await writeAuthSetup(dir, await createAuthSetup());
    ctx.stdout.write(
      [
        `wrote ${dir}`,
        `  nats-server.conf: include ${files.resolverConf}  (and a tls { } block)`,
        `  hub:   --nats-creds ${files.hubCreds} --signing-key ${files.routeSigningSeed} --agent-issuer ${files.issuerSeed}`,
        `  agent: --nats-creds ${files.bootstrapCreds}`,
        `  proxy: --route-signer ${files.routeSigningPublicKey} --nats-creds <ctrlmesh nats-auth creds --role proxy ...>`,
        '',
      ].join('\n'),
    );
    return 0;
  },
};

function roleFromFlags(ctx: CommandContext): Role {
  const role = requiredString(ctx, 'role');
  switch (role) {
    case 'hub':
    case 'bootstrap':
      return { role };
    case 'agent': {
      const cluster = requiredString(ctx, 'cluster');
      const problem = clusterNameProblem(cluster);
      if (problem) throw new UsageError(`--cluster: ${problem}`);
      return { role, cluster };
    }
    case 'proxy':
      return { role, operator: requiredString(ctx, 'operator'), shard: requiredString(ctx, 'shard') };
    default:
      throw new UsageError(`--role must be one of ${ROLES.join(', ')}, not "${role}"`);
  }
}

const credsCommand: Command = {
  name: 'creds',
  summary: 'Mint a creds file for one identity with the issuer of a setup made by `nats-auth init`.',
  usage: '--dir DIR --role ROLE [--cluster NAME | --operator NS/NAME --shard NAME] [--out FILE]',
  details: [
    'Roles: hub (everything), bootstrap (may only ask to register), agent (one cluster\'s heartbeats and reports),',
    'proxy (reads only its shard\'s route table, acknowledges only for it). Agents normally get their identity',
    'from the hub at registration; a proxy\'s goes into the Secret its sidecar mounts (docs/install.md).',
  ].join('\n'),
  options: {
    dir: { type: 'string', valueName: 'DIR', description: 'the setup written by `ctrlmesh nats-auth init`' },
    role: { type: 'string', valueName: 'ROLE', description: ROLES.join(' | ') },
    cluster: { type: 'string', valueName: 'NAME', description: 'with --role agent: the cluster' },
    operator: { type: 'string', valueName: 'NS/NAME', description: 'with --role proxy: the operator' },
    shard: { type: 'string', valueName: 'NAME', description: 'with --role proxy: the shard' },
    out: { type: 'string', valueName: 'FILE', description: 'where to write (default DIR/<user name>.creds)' },
  },
  run: async (ctx) => {
    const role = roleFromFlags(ctx);
    const files = await readAuthFiles(resolve(requiredString(ctx, 'dir'))).catch((err: unknown) => {
      throw new UsageError(`--dir does not hold a setup written by \`ctrlmesh nats-auth init\`: ${(err as Error).message}`);
    });
    const out = stringValue(ctx, 'out');
    const path = await writeRoleCreds(files, role, out ? resolve(out) : undefined);
    ctx.stdout.write(`${path}\n`);
    return 0;
  },
};

export const natsAuthCommand: Command = {
  name: 'nats-auth',
  summary: 'Create NATS identities for the hub, agents and proxies (operator, accounts, creds, signing keys).',
  usage: '<init|creds> [options]',
  options: {},
  run: async () => 2,
  subcommands: [initCommand, credsCommand],
};
