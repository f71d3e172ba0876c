import type { Logger } from 'pino';
import { RegistrationError } from '../errors.js';
import { newUserKey } from '../transport/auth/index.js';
import {
  MESSAGE_SCHEMA_VERSION,
  Messages,
  Subjects,
  connectNats,
  requestMessage,
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
    reply = await registerCluster({ link: bootstrap, identity, token: options.token, publicKey: key.publicKey, logger, signal: options.signal });
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
  const link = await connectNats({ config: { ...options.nats, credentials: { kind: 'jwt', jwt: reply.jwt, seed: key.seed } }, name, logger });
  return {
    link,
    ownIdentity: true,
    reregister: async (signal) => void (await registerCluster({ link, identity, logger, signal })),
  };
}
