import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { mintCreds, publicKeyOf, resolverConfig, type AuthSetup } from './accounts.js';
import type { Role } from './permissions.js';
import { userName } from './permissions.js';

/** Where `writeAuthSetup` puts each part; the seeds and creds are mode 0600. */
export interface AuthFiles {
  dir: string;
  /** nats-server configuration fragment (operator, accounts): `include` it. */
  resolverConf: string;
  operatorSeed: string;
  /** The account's signing key: the hub's --agent-issuer, and what `ctrlmesh nats-auth creds` mints with. */
  issuerSeed: string;
  /** The hub's route-table signing key (--signing-key); its public key is the proxies' --route-signer. */
  routeSigningSeed: string;
  hubCreds: string;
  bootstrapCreds: string;
  /** Public keys, for flags and the account every minted user belongs to. */
  accountPublicKey: string;
  routeSigningPublicKey: string;
}

export function authFiles(dir: string, keys: { accountPublicKey: string; routeSigningPublicKey: string }): AuthFiles {
  return {
    dir,
    resolverConf: join(dir, 'resolver.conf'),
    operatorSeed: join(dir, 'operator.nk'),
    issuerSeed: join(dir, 'issuer.nk'),
    routeSigningSeed: join(dir, 'route-signing.nk'),
    hubCreds: join(dir, 'hub.creds'),
    bootstrapCreds: join(dir, 'bootstrap.creds'),
    ...keys,
  };
}

const SECRET = { mode: 0o600 } as const;

/** Writes a setup's server configuration, keys and the hub's and bootstrap's creds to `dir`. */
export async function writeAuthSetup(dir: string, setup: AuthSetup): Promise<AuthFiles> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const files = authFiles(dir, { accountPublicKey: setup.account.publicKey, routeSigningPublicKey: publicKeyOf(setup.routeSigningSeed) });
  const mint = (identity: Role): Promise<string> => mintCreds({ issuerSeed: setup.issuerSeed, account: setup.account.publicKey, identity });
  await Promise.all([
    writeFile(files.resolverConf, resolverConfig(setup)),
    writeFile(files.operatorSeed, `${setup.operatorSeed}\n`, SECRET),
    writeFile(files.issuerSeed, `${setup.issuerSeed}\n`, SECRET),
    writeFile(files.routeSigningSeed, `${setup.routeSigningSeed}\n`, SECRET),
    writeFile(join(dir, 'account.pub'), `${setup.account.publicKey}\n`),
    writeFile(join(dir, 'route-signing.pub'), `${files.routeSigningPublicKey}\n`),
    mint({ role: 'hub' }).then((creds) => writeFile(files.hubCreds, creds, SECRET)),
    mint({ role: 'bootstrap' }).then((creds) => writeFile(files.bootstrapCreds, creds, SECRET)),
  ]);
  return files;
}

/** Reads back what `writeAuthSetup` wrote. */
export async function readAuthFiles(dir: string): Promise<AuthFiles> {
  const read = async (name: string): Promise<string> => (await readFile(join(dir, name), 'utf8')).trim();
  return authFiles(dir, { accountPublicKey: await read('account.pub'), routeSigningPublicKey: await read('route-signing.pub') });
}

/** Mints creds for a role with the setup's issuer and writes them next to the others; returns the path. */
export async function writeRoleCreds(files: AuthFiles, identity: Role, path?: string): Promise<string> {
  const issuerSeed = (await readFile(files.issuerSeed, 'utf8')).trim();
  const out = path ?? join(files.dir, `${userName(identity).replace(/[^A-Za-z0-9_.-]/g, '_')}.creds`);
  await writeFile(out, await mintCreds({ issuerSeed, account: files.accountPublicKey, identity }), SECRET);
  return out;
}
