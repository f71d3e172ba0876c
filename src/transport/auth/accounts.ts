import {
  Algorithms,
  createAccount,
  createOperator,
  createServer,
  createUser,
  decode,
  encodeAccount,
  encodeOperator,
  encodeUser,
  fmtCreds,
  fromSeed,
} from '@nats-io/jwt';
import { permissionsFor, userName, type Role } from './permissions.js';

/**
 * Decentralized JWT authentication for the control plane: one operator, one account for ControllerMesh, the
 * system account, and users per role minted by an account signing key (the "issuer"). The issuer lives with the
 * hub, which mints an agent's identity when the agent's bootstrap token is accepted; `ctrlmesh nats-auth` mints
 * the others. Seeds are returned as strings and never logged.
 */
export interface AuthSetup {
  operatorSeed: string;
  operatorJwt: string;
  systemAccount: { publicKey: string; seed: string; jwt: string };
  account: { publicKey: string; seed: string; jwt: string };
  /** Signing key of the account: mints users. */
  issuerSeed: string;
  /** The hub's nkey: signs route tables; proxies trust its public key. */
  routeSigningSeed: string;
}

const UNLIMITED = { subs: -1, data: -1, payload: -1, imports: -1, exports: -1, wildcards: true, conn: -1, leaf: -1 };
const JETSTREAM = { mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1, max_ack_pending: -1 };
const V2 = { algorithm: Algorithms.v2 };

const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);

/** Creates a new operator, accounts, issuer and route-signing key. */
export async function createAuthSetup(options: { name?: string } = {}): Promise<AuthSetup> {
  const name = options.name ?? 'ctrlmesh';
  const operator = createOperator();
  const system = createAccount();
  const account = createAccount();
  const issuer = createAccount();
  const operatorJwt = await encodeOperator(name, operator, { system_account: system.getPublicKey() }, V2);
  const systemJwt = await encodeAccount('SYS', system, { limits: UNLIMITED }, { ...V2, signer: operator });
  const accountJwt = await encodeAccount(
    name,
    account,
    { limits: { ...UNLIMITED, ...JETSTREAM }, signing_keys: [issuer.getPublicKey()] },
    { ...V2, signer: operator },
  );
  return {
    operatorSeed: text(operator.getSeed()),
    operatorJwt,
    systemAccount: { publicKey: system.getPublicKey(), seed: text(system.getSeed()), jwt: systemJwt },
    account: { publicKey: account.getPublicKey(), seed: text(account.getSeed()), jwt: accountJwt },
    issuerSeed: text(issuer.getSeed()),
    routeSigningSeed: text(createServer().getSeed()),
  };
}

export interface MintOptions {
  /** Seed of the account's signing key. */
  issuerSeed: string;
  /** Public key of the account the user belongs to. */
  account: string;
  identity: Role;
  /** Expiry of the JWT, seconds since the epoch; none = valid until the account revokes it. */
  expiresAt?: number;
}

/** A user JWT with the role's permissions for an existing user key (the agent keeps its seed to itself). */
export async function mintUserJwt(options: MintOptions & { publicKey: string }): Promise<string> {
  const permissions = permissionsFor(options.identity, options.publicKey);
  return encodeUser(
    userName(options.identity),
    options.publicKey,
    options.account,
    permissions ? { pub: { allow: permissions.publish }, sub: { allow: permissions.subscribe } } : {},
    { ...V2, signer: fromSeed(new TextEncoder().encode(options.issuerSeed)), ...(options.expiresAt ? { exp: options.expiresAt } : {}) },
  );
}

/** A creds file (JWT + new seed) for a role. */
export async function mintCreds(options: MintOptions): Promise<string> {
  const user = createUser();
  const jwt = await mintUserJwt({ ...options, publicKey: user.getPublicKey() });
  return text(fmtCreds(jwt, user));
}

/** A fresh user key pair, for an identity whose JWT is minted elsewhere (the agent's, by the hub). */
export function newUserKey(): { publicKey: string; seed: Uint8Array } {
  const user = createUser();
  return { publicKey: user.getPublicKey(), seed: user.getSeed() };
}

/** What a user JWT says of itself (not verified: the NATS server does that); `expiresAt` in ms, when it expires. */
export function decodeJwt(jwt: string): { subject: string; issuerAccount: string; name: string; expiresAt?: number } {
  const claims = decode<{ issuer_account?: string }>(jwt);
  return {
    subject: claims.sub,
    issuerAccount: claims.nats?.issuer_account ?? claims.iss,
    name: claims.name ?? '',
    ...(claims.exp ? { expiresAt: claims.exp * 1000 } : {}),
  };
}

/** The public key of a seed. */
export function publicKeyOf(seed: string): string {
  return fromSeed(new TextEncoder().encode(seed.trim())).getPublicKey();
}

/**
 * The nats-server configuration of the setup: operator mode with an in-memory resolver preloaded with both
 * accounts. Included from the server's main configuration.
 */
export function resolverConfig(setup: Pick<AuthSetup, 'operatorJwt' | 'systemAccount' | 'account'>): string {
  return [
    `operator: ${JSON.stringify(setup.operatorJwt)}`,
    `system_account: ${setup.systemAccount.publicKey}`,
    'resolver: MEMORY',
    'resolver_preload: {',
    `  ${setup.systemAccount.publicKey}: ${JSON.stringify(setup.systemAccount.jwt)}`,
    `  ${setup.account.publicKey}: ${JSON.stringify(setup.account.jwt)}`,
    '}',
    '',
  ].join('\n');
}
