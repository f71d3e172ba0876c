import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { checkServerIdentity, type ConnectionOptions as NodeTlsOptions, type PeerCertificate } from 'node:tls';
import {
  credsAuthenticator,
  jwtAuthenticator,
  nkeyAuthenticator,
  tokenAuthenticator,
  usernamePasswordAuthenticator,
  type Authenticator,
  type ConnectionOptions,
  type TlsOptions,
} from '@nats-io/transport-node';
import { fromSeed } from '@nats-io/nkeys';
import { Type, type Static } from '@sinclair/typebox';
import { ReadonlyList } from '../api/index.js';
import { CtrlmeshError, ErrorCodes } from '../errors.js';

/** What the client presents; files are read again at each (re)connection, so rotated secrets take effect. */
export const NatsCredentialsSchema = Type.Union([
  /** A creds file: user JWT + nkey seed, as `nsc` and `ctrlmesh nats-auth` write it. */
  Type.Object({ kind: Type.Literal('creds'), file: Type.String({ minLength: 1 }) }, { additionalProperties: false }),
  /** A user JWT and its seed held in memory (an agent's identity, minted by the hub at registration). */
  Type.Object({ kind: Type.Literal('jwt'), jwt: Type.String({ minLength: 1 }), seed: Type.Uint8Array() }, { additionalProperties: false }),
  /** A bare nkey seed (server configured with `nkey:` users). */
  Type.Object({ kind: Type.Literal('nkey'), seedFile: Type.String({ minLength: 1 }) }, { additionalProperties: false }),
  Type.Object({ kind: Type.Literal('user'), user: Type.String({ minLength: 1 }), passwordFile: Type.String({ minLength: 1 }) }, { additionalProperties: false }),
  Type.Object({ kind: Type.Literal('token'), tokenFile: Type.String({ minLength: 1 }) }, { additionalProperties: false }),
]);
export type NatsCredentials = Static<typeof NatsCredentialsSchema>;

/**
 * How a process reaches NATS: where, over which TLS, as whom. One schema for the hub's, the agent's and the
 * proxy's options, built once from flags and environment (src/cli/commands/nats-flags.ts) and frozen.
 */
export const NatsClientConfigSchema = Type.Object(
  {
    servers: ReadonlyList(Type.String({ minLength: 1 }), { minItems: 1 }),
    /** TLS: the CA that signs the server's certificate (verified), and optionally a client certificate. */
    tls: Type.Optional(
      Type.Object(
        { caFile: Type.String({ minLength: 1 }), certFile: Type.Optional(Type.String({ minLength: 1 })), keyFile: Type.Optional(Type.String({ minLength: 1 })) },
        { additionalProperties: false },
      ),
    ),
    credentials: Type.Optional(NatsCredentialsSchema),
  },
  { additionalProperties: false },
);
export type NatsClientConfig = Static<typeof NatsClientConfigSchema>;

function readSecret(path: string, what: string, trim = true): string {
  try {
    const text = readFileSync(path, 'utf8');
    return trim ? text.trim() : text;
  } catch (err) {
    throw new CtrlmeshError(ErrorCodes.NATS, `cannot read the NATS ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, {
      cause: err,
    });
  }
}

const SEED_LINE = /^\s*(S[A-Z2-7]{57})\s*$/m;
const JWT_BLOCK = /-----BEGIN NATS USER JWT-----\s*\n\s*([A-Za-z0-9_.-]+)\s*\n/;

/** The user's public nkey of the credentials, when they have one (creds, jwt, nkey). */
export function credentialsPublicKey(credentials: NatsCredentials | undefined): string | undefined {
  switch (credentials?.kind) {
    case 'jwt':
      return fromSeed(credentials.seed).getPublicKey();
    case 'creds': {
      const seed = SEED_LINE.exec(readSecret(credentials.file, 'creds file'))?.[1];
      if (!seed) throw new CtrlmeshError(ErrorCodes.NATS, `the NATS creds file ${credentials.file} holds no nkey seed`);
      return fromSeed(new TextEncoder().encode(seed)).getPublicKey();
    }
    case 'nkey':
      return fromSeed(new TextEncoder().encode(readSecret(credentials.seedFile, 'nkey seed file'))).getPublicKey();
    default:
      return undefined;
  }
}

/** The user JWT of a creds file. */
export function credsJwt(file: string): string {
  const jwt = JWT_BLOCK.exec(readSecret(file, 'creds file'))?.[1];
  if (!jwt) throw new CtrlmeshError(ErrorCodes.NATS, `the NATS creds file ${file} holds no user JWT`);
  return jwt;
}

/**
 * The prefix of this identity's reply inboxes. An identity with a key gets `_INBOX_<public key>`, the only inbox
 * its permissions let it subscribe to (src/transport/auth/permissions.ts): no identity can read another's replies.
 */
export function inboxPrefixFor(credentials: NatsCredentials | undefined): string {
  const key = credentialsPublicKey(credentials);
  return key ? `_INBOX_${key}` : '_INBOX';
}

function authenticator(credentials: NatsCredentials): Authenticator {
  switch (credentials.kind) {
    case 'creds':
      // Untrimmed: nats.js finds each block by the newline after its closing line.
      return credsAuthenticator(() => new TextEncoder().encode(readSecret(credentials.file, 'creds file', false)));
    case 'jwt':
      return jwtAuthenticator(credentials.jwt, credentials.seed);
    case 'nkey':
      return nkeyAuthenticator(() => new TextEncoder().encode(readSecret(credentials.seedFile, 'nkey seed file')));
    case 'user':
      return usernamePasswordAuthenticator(credentials.user, () => readSecret(credentials.passwordFile, 'password file'));
    case 'token':
      return tokenAuthenticator(() => readSecret(credentials.tokenFile, 'token file'));
  }
}

/** The nats.js options of a config (servers, TLS, authenticator, inbox prefix). */
export function natsConnectionOptions(config: NatsClientConfig): Pick<ConnectionOptions, 'servers' | 'tls' | 'authenticator' | 'inboxPrefix'> {
  // nats.js hands its TLS options on to Node's tls.connect, which takes checkServerIdentity.
  const tls: TlsOptions & Pick<NodeTlsOptions, 'checkServerIdentity'> | undefined = config.tls && {
    caFile: config.tls.caFile,
    ...(config.tls.certFile ? { certFile: config.tls.certFile } : {}),
    ...(config.tls.keyFile ? { keyFile: config.tls.keyFile } : {}),
    checkServerIdentity: serverIdentityCheck(config.servers),
  };
  return {
    servers: [...config.servers],
    ...(tls ? { tls } : {}),
    ...(config.credentials ? { authenticator: authenticator(config.credentials), inboxPrefix: inboxPrefixFor(config.credentials) } : {}),
  };
}

/** The host of a server URL (`tls://10.0.0.10:4222`, `nats://[::1]:4222`), without IPv6 brackets. */
function urlHost(server: string): string {
  const withScheme = /^[a-z]+:\/\//i.test(server) ? server : `nats://${server}`;
  return new URL(withScheme).hostname.replace(/^\[(.*)\]$/, '$1');
}

/**
 * Checks the server certificate's name. nats.js gives TLS no name for a server URL that is an IP address (an IP
 * may not be an SNI name), so Node would check the certificate against "localhost": a certificate naming the
 * server's IP would fail, and one naming localhost would pass for any server. For that fallback the certificate
 * must name one of the configured servers instead; a named host is checked as usual.
 */
export function serverIdentityCheck(servers: readonly string[]): (name: string, cert: PeerCertificate) => Error | undefined {
  const hosts = servers.map(urlHost);
  const fallback = [...new Set(hosts.filter((h) => isIP(h) !== 0 || h === 'localhost'))];
  return (name, cert) => {
    if (name !== 'localhost' || fallback.length === 0) return checkServerIdentity(name, cert);
    if (fallback.some((host) => checkServerIdentity(host, cert) === undefined)) return undefined;
    return new CtrlmeshError(ErrorCodes.NATS, `the NATS server's certificate names none of the configured servers (${fallback.join(', ')})`);
  };
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);

/**
 * Why a config is unsafe though usable: a plain `nats://` URL to another host without TLS sends credentials and
 * every message in clear. Returned as sentences for a warning; the connection is still made.
 */
export function natsConfigWarnings(config: NatsClientConfig): string[] {
  if (config.tls) return [];
  const warnings: string[] = [];
  for (const server of config.servers) {
    let url: URL;
    try {
      url = new URL(server.includes('://') ? server : `nats://${server}`);
    } catch {
      continue;
    }
    if (url.protocol === 'tls:') continue;
    if (!LOOPBACK.has(url.hostname)) {
      warnings.push(`NATS server ${server} is reached without TLS: credentials and messages travel in clear (give --nats-ca)`);
    }
  }
  return warnings;
}
