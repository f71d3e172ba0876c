import { UsageError } from '../../errors.js';
import type { NatsClientConfig, NatsCredentials } from '../../transport/index.js';
import { stringList, stringValue, type CommandContext, type OptionSpec } from '../command.js';
import { readFlagFile } from './flags.js';

/**
 * The NATS connection flags, the same for `hub`, `agent` and `proxy`. Each has an environment variable (the
 * flag wins), so a chart can point them at mounted Secrets.
 */
export const NATS_FLAGS: Record<string, OptionSpec & { env: string }> = {
  nats: { type: 'string', multiple: true, valueName: 'URL', env: 'CTRLMESH_NATS_URL', description: 'NATS server URL (repeatable or comma-separated; tls://… with --nats-ca)' },
  'nats-ca': { type: 'string', valueName: 'FILE', env: 'CTRLMESH_NATS_CA', description: 'CA of the NATS server certificate: TLS, verified' },
  'nats-cert': { type: 'string', valueName: 'FILE', env: 'CTRLMESH_NATS_CERT', description: 'client certificate for NATS TLS (with --nats-key)' },
  'nats-key': { type: 'string', valueName: 'FILE', env: 'CTRLMESH_NATS_KEY', description: "the client certificate's private key" },
  'nats-creds': { type: 'string', valueName: 'FILE', env: 'CTRLMESH_NATS_CREDS', description: 'NATS creds file (user JWT + nkey seed)' },
  'nats-nkey': { type: 'string', valueName: 'FILE', env: 'CTRLMESH_NATS_NKEY', description: 'NATS nkey seed file' },
  'nats-user': { type: 'string', valueName: 'NAME', env: 'CTRLMESH_NATS_USER', description: 'NATS user (with --nats-password-file)' },
  'nats-password-file': { type: 'string', valueName: 'FILE', env: 'CTRLMESH_NATS_PASSWORD_FILE', description: "the NATS user's password" },
  'nats-token-file': { type: 'string', valueName: 'FILE', env: 'CTRLMESH_NATS_TOKEN_FILE', description: 'NATS authentication token' },
};

/** A flag's value, or its environment variable's. */
function flagOrEnv(ctx: CommandContext, flag: string): string | undefined {
  const value = stringValue(ctx, flag);
  if (value !== undefined) return value;
  const env = NATS_FLAGS[flag]?.env;
  const fromEnv = env ? ctx.env[env] : undefined;
  return fromEnv === undefined || fromEnv === '' ? undefined : fromEnv;
}

/** A file flag whose file must be readable now: a missing Secret mount is a clear error at start, not a reconnect loop. */
function fileFlag(ctx: CommandContext, flag: string): string | undefined {
  const path = flagOrEnv(ctx, flag);
  if (path !== undefined) readFlagFile(flag, path);
  return path;
}

function credentials(ctx: CommandContext): NatsCredentials | undefined {
  const given: NatsCredentials[] = [];
  const creds = fileFlag(ctx, 'nats-creds');
  if (creds) given.push({ kind: 'creds', file: creds });
  const nkey = fileFlag(ctx, 'nats-nkey');
  if (nkey) given.push({ kind: 'nkey', seedFile: nkey });
  const user = flagOrEnv(ctx, 'nats-user');
  const password = fileFlag(ctx, 'nats-password-file');
  if ((user === undefined) !== (password === undefined)) throw new UsageError('--nats-user and --nats-password-file go together');
  if (user && password) given.push({ kind: 'user', user, passwordFile: password });
  const token = fileFlag(ctx, 'nats-token-file');
  if (token) given.push({ kind: 'token', tokenFile: token });
  if (given.length > 1) throw new UsageError('give one of --nats-creds, --nats-nkey, --nats-user or --nats-token-file');
  return given[0];
}

/** The NATS config the flags and environment name; undefined when no server is given. */
export function natsConfigFromFlags(ctx: CommandContext): NatsClientConfig | undefined {
  const urls = stringList(ctx, 'nats');
  const servers = (urls.length ? urls : (flagOrEnv(ctx, 'nats')?.split(',') ?? [])).flatMap((u) => u.split(',')).map((u) => u.trim()).filter(Boolean);
  if (servers.length === 0) return undefined;
  const ca = fileFlag(ctx, 'nats-ca');
  const cert = fileFlag(ctx, 'nats-cert');
  const key = fileFlag(ctx, 'nats-key');
  if ((cert === undefined) !== (key === undefined)) throw new UsageError('--nats-cert and --nats-key go together');
  if (cert && !ca) throw new UsageError('--nats-cert needs --nats-ca (the server certificate is always verified)');
  if (!ca && servers.some((s) => s.startsWith('tls://'))) throw new UsageError('a tls:// NATS URL needs --nats-ca, the CA that signs the server certificate');
  const auth = credentials(ctx);
  return Object.freeze({
    servers: Object.freeze(servers),
    ...(ca ? { tls: Object.freeze({ caFile: ca, ...(cert && key ? { certFile: cert, keyFile: key } : {}) }) } : {}),
    ...(auth ? { credentials: Object.freeze(auth) } : {}),
  });
}

/** Like natsConfigFromFlags, for commands that cannot run without NATS. */
export function requiredNatsConfig(ctx: CommandContext): NatsClientConfig {
  const config = natsConfigFromFlags(ctx);
  if (!config) throw new UsageError(`--nats is required (or ${NATS_FLAGS.nats?.env ?? 'CTRLMESH_NATS_URL'})`);
  return config;
}

/** The option specs of the NATS flags, as a command's `options` takes them. */
export const natsOptions: Record<string, OptionSpec> = Object.fromEntries(
  Object.entries(NATS_FLAGS).map(([name, { env, description, ...spec }]) => [name, { ...spec, description: `${description} [$${env}]` }]),
);

/**
 * Public route-signing keys (N...) given to a repeatable flag (comma-separated values too), or to `env` when the
 * flag is absent; each checked. Empty when none is given: the caller says whether one is required.
 */
export function routeSignerKeys(ctx: CommandContext, flag: string, env?: string): string[] {
  const given = stringList(ctx, flag);
  const raw = given.length ? given : env ? [ctx.env[env] ?? ''] : [];
  const keys = raw.flatMap((k) => k.split(',')).map((k) => k.trim()).filter(Boolean);
  const bad = keys.find((k) => !/^N[A-Z2-7]{55}$/.test(k));
  if (bad) throw new UsageError(`--${flag} must be a public server nkey (N followed by 55 characters), not "${bad}"`);
  return keys;
}
