import { createHash, timingSafeEqual } from 'node:crypto';
import {
  MESSAGE_SCHEMA_VERSION,
  type ClusterRecord,
  type RegisterReply,
  type RegisterRequest,
} from '../transport/index.js';

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** Whether the token is one of the accepted ones, in time independent of where they differ. */
export function tokenAccepted(token: string, accepted: readonly string[]): boolean {
  const given = digest(token);
  let ok = false;
  for (const candidate of accepted) ok = timingSafeEqual(given, digest(candidate)) || ok;
  return ok;
}

export type RegistrationDecision =
  | { reply: RegisterReply; write: 'none' }
  | { reply: RegisterReply; write: 'put'; record: ClusterRecord };

/**
 * What to answer and store for a registration (pure). A refused token records nothing; registering again with the
 * same identity writes nothing; a changed endpoint, CA or labels updates the record and keeps `registeredAt`.
 */
export function decideRegistration(options: {
  request: RegisterRequest;
  tokens: readonly string[];
  existing: ClusterRecord | undefined;
  now: Date;
}): RegistrationDecision {
  const { request, existing } = options;
  if (!tokenAccepted(request.token, options.tokens)) {
    return {
      write: 'none',
      reply: {
        schema: MESSAGE_SCHEMA_VERSION,
        ok: false,
        error: `registration of cluster "${request.cluster.name}" refused: the bootstrap token is not one the hub accepts; check the agent's --token-file against the hub's`,
      },
    };
  }
  const ok: RegisterReply = { schema: MESSAGE_SCHEMA_VERSION, ok: true };
  if (existing && sameIdentity(existing.cluster, request.cluster)) return { write: 'none', reply: ok };
  const at = options.now.toISOString();
  return {
    write: 'put',
    reply: ok,
    record: { schema: MESSAGE_SCHEMA_VERSION, cluster: request.cluster, registeredAt: existing?.registeredAt ?? at, updatedAt: at },
  };
}

function sameIdentity(a: ClusterRecord['cluster'], b: ClusterRecord['cluster']): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

function canonical(c: ClusterRecord['cluster']): unknown {
  return { ...c, labels: Object.fromEntries(Object.entries(c.labels).sort(([x], [y]) => (x < y ? -1 : 1))) };
}
