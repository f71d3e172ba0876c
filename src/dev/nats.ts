import { mkdir, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { createAuthSetup, writeAuthSetup, writeRoleCreds, type AuthFiles, type Role } from '../transport/auth/index.js';
import type { NatsClientConfig } from '../transport/index.js';
import { createCertificateAuthority, issueCertificate } from '../tls/index.js';
import { freePort } from './free-port.js';
import { httpOk } from './probes.js';
import { ServerProcess, serverControl, type ServerControl, type ServerStartOptions } from './server-process.js';
import { resolveTool } from './tools.js';

/** Its dir holds the configuration, keys, JetStream store, the log and the pid file. */
export interface NatsOptions extends ServerStartOptions {
  /**
   * `secure` (default): TLS with the bed's own CA and decentralized JWT auth, an identity per role (as a
   * production bus runs). `open`: plain TCP, no authentication, for comparing the cost of security.
   */
  security?: 'secure' | 'open';
}

/** How clients reach a secure bed's NATS; absent on an open one. */
export interface NatsSecurity {
  /** The CA of the server's TLS certificate. */
  caFile: string;
  auth: AuthFiles;
}

export interface NatsHandle extends ServerControl {
  /** Client URL: tls://127.0.0.1:PORT (secure) or nats://127.0.0.1:PORT (open). */
  url: string;
  /** Every client URL: here just `url` (a cluster lists one per server). */
  urls: string[];
  /** Monitoring endpoint (/healthz, /varz, /jsz), http://127.0.0.1:PORT. */
  monitorUrl: string;
  storeDir: string;
  security?: NatsSecurity;
}

/** What a secure server's configuration adds: its TLS block and the auth include, for a config file in `confDir`. */
export interface SecureSetup {
  security: NatsSecurity;
  lines(confDir: string): string[];
}

/** Writes the bed's CA, one serving certificate (for 127.0.0.1 and localhost) and the auth setup into `dir`. */
export async function secureSetup(dir: string): Promise<SecureSetup> {
  const ca = await createCertificateAuthority({ commonName: 'ctrlmesh-testbed-nats-ca' });
  const serving = await issueCertificate({ ca, commonName: 'nats', dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'], usage: 'server' });
  const tlsDir = join(dir, 'tls');
  await mkdir(tlsDir, { recursive: true, mode: 0o700 });
  const caFile = join(tlsDir, 'ca.crt');
  await Promise.all([
    writeFile(caFile, ca.certPem),
    writeFile(join(tlsDir, 'server.crt'), serving.certPem),
    writeFile(join(tlsDir, 'server.key'), serving.keyPem, { mode: 0o600 }),
  ]);
  const auth = await writeAuthSetup(join(dir, 'auth'), await createAuthSetup());
  return {
    security: { caFile, auth },
    lines: (confDir) => [
      `tls { cert_file: ${JSON.stringify(join(tlsDir, 'server.crt'))}, key_file: ${JSON.stringify(join(tlsDir, 'server.key'))}, timeout: 5 }`,
      // nats-server resolves an include against the including file's directory.
      `include ${JSON.stringify(relative(confDir, auth.resolverConf))}`,
    ],
  };
}

/** One nats-server with JetStream on 127.0.0.1; ready once /healthz reports JetStream enabled. */
export async function startNats(options: NatsOptions): Promise<NatsHandle> {
  const binary = options.binary ?? (await resolveTool('nats-server', options)).path;
  const [port, monitorPort] = [await freePort(), await freePort()];
  const storeDir = join(options.dir, 'jetstream');
  const monitorUrl = `http://127.0.0.1:${monitorPort}`;
  await mkdir(options.dir, { recursive: true });
  const secure = (options.security ?? 'secure') === 'secure' ? await secureSetup(options.dir) : undefined;
  const configFile = join(options.dir, 'nats.conf');
  await writeFile(
    configFile,
    [
      'server_name: ctrlmesh-testbed',
      `listen: 127.0.0.1:${port}`,
      `http: 127.0.0.1:${monitorPort}`,
      `jetstream { store_dir: ${JSON.stringify(storeDir)} }`,
      ...(secure?.lines(options.dir) ?? []),
      '',
    ].join('\n'),
  );
  const server = new ServerProcess({
    name: 'nats-server',
    binary,
    dir: options.dir,
    logFileName: 'nats-server.log',
    args: ['-c', configFile],
    probe: () => httpOk(`${monitorUrl}/healthz?js-enabled-only=true`),
    readyTimeoutMs: 30_000,
    stopTimeoutMs: 10_000,
    logger: options.logger,
  });
  await server.start(options.signal);
  const url = `${secure ? 'tls' : 'nats'}://127.0.0.1:${port}`;
  return {
    url,
    urls: [url],
    monitorUrl,
    storeDir,
    ...(secure ? { security: secure.security } : {}),
    ...serverControl(server),
  };
}

/** Where a bed's NATS is, as testbed.json records it. */
export interface NatsEndpoint {
  /** The first server's client URL. */
  url: string;
  /** Every server's client URL (a cluster has several); `[url]` when absent. */
  urls?: string[];
  security?: NatsSecurity;
}

/** Every client URL of an endpoint. */
export function natsUrls(nats: NatsEndpoint): string[] {
  return nats.urls?.length ? [...nats.urls] : [nats.url];
}

/**
 * A client config for one identity on a bed's NATS: TLS with the bed's CA, and creds minted for the role (the
 * hub's and the bootstrap's were written at start). On an open bed, just the URL.
 */
export async function natsClientConfig(nats: NatsEndpoint, identity: Role): Promise<NatsClientConfig> {
  const servers = natsUrls(nats);
  if (!nats.security) return { servers };
  const { auth, caFile } = nats.security;
  const file =
    identity.role === 'hub' ? auth.hubCreds : identity.role === 'bootstrap' ? auth.bootstrapCreds : await writeRoleCreds(auth, identity);
  return { servers, tls: { caFile }, credentials: { kind: 'creds', file } };
}
