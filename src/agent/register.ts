import type { Logger } from 'pino';
import { CtrlmeshError, ErrorCodes } from '../errors.js';
import { MESSAGE_SCHEMA_VERSION, Messages, Subjects, requestMessage, type ClusterIdentity, type NatsLink } from '../transport/index.js';

export class RegistrationError extends CtrlmeshError {
  constructor(message: string) {
    super(ErrorCodes.REGISTRATION, message);
    this.name = 'RegistrationError';
  }
}

/**
 * Registers the cluster with the hub, retrying while no hub answers. A refusal (wrong token) is final: it throws
 * a RegistrationError with the hub's explanation.
 */
export async function registerCluster(options: {
  link: NatsLink;
  identity: ClusterIdentity;
  token: string;
  logger: Logger;
  signal: AbortSignal;
  retryMs?: number;
}): Promise<void> {
  for (let attempt = 1; !options.signal.aborted; attempt++) {
    try {
      const reply = await requestMessage({
        link: options.link,
        subject: Subjects.register,
        request: Messages.registerRequest,
        reply: Messages.registerReply,
        value: { schema: MESSAGE_SCHEMA_VERSION, token: options.token, cluster: options.identity },
        timeoutMs: 3_000,
        logger: options.logger,
      });
      if (!reply.ok) throw new RegistrationError(reply.error ?? `the hub refused cluster "${options.identity.name}"`);
      options.logger.info({ cluster: options.identity.name }, 'registered with the hub');
      return;
    } catch (err) {
      if (err instanceof RegistrationError) throw err;
      if (attempt === 1 || attempt % 10 === 0) {
        options.logger.warn({ err: (err as Error).message, attempt }, 'registration not answered yet; retrying');
      }
      await new Promise((r) => setTimeout(r, options.retryMs ?? 1_000));
    }
  }
}
