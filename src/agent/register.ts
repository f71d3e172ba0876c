import type { Logger } from 'pino';
import { CtrlmeshError, ErrorCodes, RegistrationError } from '../errors.js';
import { jwtAuthenticator, type Authenticator } from '@nats-io/transport-node';
import { deadline } from '../runtime/index.js';
import { decodeJwt, newUserKey } from '../transport/auth/index.js';
import {
  MESSAGE_SCHEMA_VERSION,
  Messages,
  Subjects,
  connectNats,
  requestMessage,
  signableNonce,
  type ClusterIdentity,
  type NatsClientConfig,
  type NatsLink,
  type RegisterReply,
} from '../transport/index.js';

interface RegisterOptions {
  link: NatsLink;
  identity: ClusterIdentity;
  /** With a token: the bootstrap exchange on `ctrlmesh.register`; without: under the cluster's own identity. */
  token?: string;
  publicKey?: string;
  /**
   * The agent's own key (an nkey seed), which signs the request (message-proof.ts): with a token, to prove it holds
   * the key it asks to bind; under its own identity, to prove it is the agent and not a copy of its identity.
   */
  seed?: Uint8Array;
  logger: Logger;
  signal: AbortSignal;
  retryMs?: number;
}

/**
 * Registers the cluster with the hub, retrying while no hub answers. A refusal (wrong token, a server that is not
 * https) is final: it throws a RegistrationError with the hub's explanation.
 */
export async function registerCluster(options: RegisterOptions): Promise<RegisterReply> {
  const subject = options.token === undefined ? Subjects.registerAs(options.identity.name) : Subjects.register;
  for (let attempt = 1; ; attempt++) {
    if (options.signal.aborted) throw new RegistrationError(`registration of cluster "${options.identity.name}" aborted`);
    try {
      const reply = await requestMessage({
        link: options.link,
        subject,
        request: Messages.registerRequest,
        reply: Messages.registerReply,
        value: {
          schema: MESSAGE_SCHEMA_VERSION,
          cluster: options.identity,
          ...(options.token !== undefined ? { token: options.token } : {}),
          ...(options.publicKey ? { publicKey: options.publicKey } : {}),
        },
        proofKey: options.seed,
        timeoutMs: 3_000,
        logger: options.logger,
      });
      if (!reply.ok) throw new RegistrationError(reply.error ?? `the hub refused cluster "${options.identity.name}"`);
      options.logger.info({ cluster: options.identity.name, ownIdentity: reply.jwt !== undefined }, 'registered with the hub');
      return reply;
    } catch (err) {
      if (err instanceof RegistrationError) throw err;
      if (attempt === 1 || attempt % 10 === 0) {
        options.logger.warn({ err: (err as Error).message, attempt }, 'registration not answered yet; retrying');
      }
      await new Promise((r) => setTimeout(r, options.retryMs ?? 1_000));
    }
  }
}

/** The agent's NATS link after registration, and how it registers again after a reconnection. */
export interface RegisteredLink {
  link: NatsLink;
  /** True when the hub minted the agent an identity of its own (the link uses it). */
  ownIdentity: boolean;
  /** The key the agent signs what it publishes with (its reports), when it has an identity of its own. */
  proofKey?: Uint8Array;
  reregister(signal: AbortSignal): Promise<void>;
}

/**
 * Connects with the configured (bootstrap) credentials and exchanges the bootstrap token for an identity of the
 * cluster's own, as a kubelet exchanges a bootstrap token for its own certificate: the agent makes a key pair, sends
 * only the public key, and the hub answers with a user JWT whose permissions cover this cluster alone. The seed
 * never leaves the process. Then the agent reconnects as itself; a hub that mints nothing leaves it on the
 * bootstrap link.
 */
export async function connectAndRegister(options: {
  nats: NatsClientConfig;
  identity: ClusterIdentity;
  token: string;
  logger: Logger;
  signal: AbortSignal;
}): Promise<RegisteredLink> {
  const { identity, logger } = options;
  const name = `ctrlmesh-agent-${identity.name}`;
  const bootstrap = await connectNats({ config: options.nats, name, logger });
  const key = newUserKey();
  let reply: RegisterReply;
  try {
    reply = await registerCluster({ link: bootstrap, identity, token: options.token, publicKey: key.publicKey, seed: key.seed, logger, signal: options.signal });
  } catch (err) {
    await bootstrap.close();
    throw err;
  }
  if (reply.jwt === undefined) {
    return {
      link: bootstrap,
      ownIdentity: false,
      reregister: async (signal) => void (await registerCluster({ link: bootstrap, identity, token: options.token, logger, signal })),
    };
  }
  await bootstrap.close();
  let jwt = reply.jwt;
  const expiresAt = (): number | undefined => decodeJwt(jwt).expiresAt;
  const link = await connectNats({
    config: { ...options.nats, credentials: { kind: 'jwt', jwt, seed: key.seed } },
    // Every (re)connection presents the latest JWT: the server closes the connection when the one it holds expires.
    authenticator: proofSafeAuthenticator(jwtAuthenticator(() => jwt, key.seed)),
    name,
    logger,
  });
  // Once as itself, signed with its key (idempotent): a token binds its key but does not re-point a registered
  // cluster to a new server or CA; the cluster's own identity, signing with the bound key, does.
  try {
    await registerCluster({ link, identity, seed: key.seed, logger, signal: options.signal });
  } catch (err) {
    await link.close();
    throw err;
  }
  // Reused across renewal attempts made with the token, so that a NATS outage leaves one connection trying, not one
  // per attempt; closed once a renewal succeeds, is refused, or the agent stops.
  let tokenLink: Promise<NatsLink> | undefined;
  const closeTokenLink = (): void => {
    const closing = tokenLink;
    tokenLink = undefined;
    void closing?.then((l) => l.close(), () => undefined);
  };
  options.signal.addEventListener('abort', closeTokenLink, { once: true });
  renewIdentity({
    expiresAt,
    renew: async (signal) => {
      // Under its own identity while that is valid; once expired (no hub answered for half its life), with the
      // bootstrap token, as at start. Judged by the expiry, not the link's state: an expired link flaps while
      // nats.js retries it.
      if (Date.now() < (expiresAt() ?? Infinity)) return (await registerCluster({ link, identity, publicKey: key.publicKey, seed: key.seed, logger, signal })).jwt;
      tokenLink ??= connectNats({ config: options.nats, name, logger }).catch((err: unknown) => {
        tokenLink = undefined;
        throw err;
      });
      const renewed = await registerCluster({ link: await tokenLink, identity, token: options.token, publicKey: key.publicKey, seed: key.seed, logger, signal });
      closeTokenLink();
      return renewed.jwt;
    },
    renewed: (next) => {
      jwt = next;
    },
    // Removed from the fleet: nothing this agent sends counts any more, and its identity is about to expire.
    refused: () => {
      closeTokenLink();
      void link.close();
    },
    logger,
    signal: options.signal,
  });
  return {
    link,
    ownIdentity: true,
    proofKey: key.seed,
    reregister: async (signal) => void (await registerCluster({ link, identity, seed: key.seed, logger, signal })),
  };
}

/** Signs only nonces that look like a nats-server's: the same key signs the agent's proofs (message-proof.ts). */
function proofSafeAuthenticator(inner: Authenticator): Authenticator {
  return (nonce) => {
    if (!signableNonce(nonce)) throw new CtrlmeshError(ErrorCodes.NATS, 'the NATS server sent a login nonce unlike a nats-server\'s: not signed with the agent\'s key');
    return inner(nonce);
  };
}

/** How long one renewal attempt may take (it asks the hub once a second until answered), and the pause after one. */
const RENEW_ATTEMPT_MS = 10_000;
const RENEW_RETRY_MS = 5_000;

/**
 * Renews the agent's identity halfway through its life, for the same key (its reply inbox is named by it), and
 * again each RENEW_ATTEMPT_MS until one succeeds. A refusal (the cluster was removed) ends the renewals and the
 * agent's connection; the NATS server refuses the identity once it expires, whoever holds a copy.
 */
function renewIdentity(options: {
  expiresAt: () => number | undefined;
  renew: (signal: AbortSignal) => Promise<string | undefined>;
  renewed: (jwt: string) => void;
  refused: () => void;
  logger: Logger;
  signal: AbortSignal;
}): void {
  const { logger, signal } = options;
  let timer: NodeJS.Timeout | undefined;
  const schedule = (delayMs: number): void => {
    timer = setTimeout(() => void attempt(), delayMs);
  };
  const scheduleHalfway = (): void => {
    const expiresAt = options.expiresAt();
    if (expiresAt !== undefined) schedule(Math.max(0, (expiresAt - Date.now()) / 2));
  };
  const attempt = async (): Promise<void> => {
    const attemptDeadline = deadline(signal, RENEW_ATTEMPT_MS);
    const attemptSignal = attemptDeadline.signal;
    // The attempt ends with its deadline even while its connection is still being made (NATS down too).
    const ended = new Promise<never>((_, reject) => attemptSignal.addEventListener('abort', () => reject(new RegistrationError('renewal attempt timed out')), { once: true }));
    ended.catch(() => undefined);
    try {
      const jwt = await Promise.race([options.renew(attemptSignal), ended]).finally(() => attemptDeadline.clear());
      if (signal.aborted) return;
      if (jwt === undefined) throw new Error('the hub minted no identity');
      options.renewed(jwt);
      logger.info({ expiresAt: new Date(options.expiresAt() ?? 0).toISOString() }, "renewed the agent's NATS identity");
      scheduleHalfway();
    } catch (err) {
      if (signal.aborted) return;
      // A refusal is final; an attempt that ran out of time (no hub answered) is tried again.
      if (err instanceof RegistrationError && !attemptSignal.aborted) {
        logger.error({ err: err.message }, "the hub refused to renew the agent's NATS identity: the agent disconnects from NATS");
        options.refused();
        return;
      }
      logger.warn({ err: (err as Error).message }, "could not renew the agent's NATS identity yet; retrying");
      schedule(RENEW_RETRY_MS);
    }
  };
  signal.addEventListener('abort', () => clearTimeout(timer), { once: true });
  scheduleHalfway();
}
