import { createHash, timingSafeEqual } from 'node:crypto';
import {
  Buckets,
  MESSAGE_SCHEMA_VERSION,
  endpointProblem,
  type AgentKey,
  type ClusterRecord,
  type RegisterReply,
  type RegisterRequest,
} from '../transport/index.js';

/** A bootstrap token and the one cluster it may register; with labels, the only labels that cluster gets. */
export interface BootstrapToken {
  cluster: string;
  token: string;
  labels?: Readonly<Record<string, string>> | undefined;
}

function digest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** Whether `token` is accepted for `cluster`, in time independent of where (and whether) the candidates differ. */
export function tokenAccepted(token: string, cluster: string, accepted: readonly BootstrapToken[]): boolean {
  const given = digest(token);
  let ok = false;
  for (const candidate of accepted) ok = (timingSafeEqual(given, digest(candidate.token)) && candidate.cluster === cluster) || ok;
  return ok;
}

/** How the request arrived: with a bootstrap token, or under the cluster's own identity (its subject). */
export type RegistrationChannel = 'bootstrap' | 'identity';

export type RegistrationDecision = (
  | { reply: RegisterReply; write: 'none' }
  | { reply: RegisterReply; write: 'put'; record: ClusterRecord }
) & {
  /** The key to bind the cluster's agent to (store as its agentkey) before minting an identity for it. */
  bind?: { publicKey: string; signs: boolean };
};

const refuse = (error: string): RegistrationDecision => ({ write: 'none', reply: { schema: MESSAGE_SCHEMA_VERSION, ok: false, error } });


/**
 * What to answer and store for a registration (pure). A bootstrap token registers only the cluster it is bound
 * to, and cannot re-point a registered cluster to another server or CA: that takes the cluster's own identity
 * (channel `identity`) or an operator deleting the record. Registering again with the same identity writes
 * nothing; a change updates the record and keeps `registeredAt`.
 */
export function decideRegistration(options: {
  request: RegisterRequest;
  channel: RegistrationChannel;
  tokens: readonly BootstrapToken[];
  existing: ClusterRecord | undefined;
  /** Whether the cluster was removed from the fleet (`ctrlmesh clusters remove`): refused on either channel. */
  removed: boolean;
  /**
   * The public key the request's reply inbox is named by: the requester's own, since an identity may read no other
   * inbox. On the identity channel an identity is minted only for it.
   */
  requesterKey: string | undefined;
  /**
   * The key the cluster's agent was last minted an identity for with its token (its agentkey); one without a key after
   * a removal; undefined when none is stored.
   */
  binding: AgentKey | undefined;
  /** Whether the hub mints identities (`--agent-issuer`) and the request names a key to mint one for. */
  mints: boolean;
  /**
   * Whether the request is signed, just now, with the key that counts (`messageProvenAt`): under the cluster's own
   * identity the bound key (the request's, when none is bound); with a token, the key it asks to bind.
   */
  proven: boolean;
  now: Date;
}): RegistrationDecision {
  const { request, existing } = options;
  const name = request.cluster.name;
  if (options.removed) {
    return refuse(`registration of cluster "${name}" refused: it was removed from the fleet; \`ctrlmesh clusters readmit ${name}\` (with the hub's NATS credentials) lets it register again`);
  }
  if (options.channel === 'bootstrap' && !tokenAccepted(request.token ?? '', name, options.tokens)) {
    return refuse(
      `registration of cluster "${name}" refused: the bootstrap token is not one the hub accepts for this cluster; check the agent's --token-file against the hub's "${name} TOKEN" line`,
    );
  }
  // Removed and readmitted, the cluster speaks under its own identity again only once its token has bound a key: a
  // copy of the old identity, still valid, does not register it first (test/integration/reply-injection.test.ts, "a
  // copy of a cluster's identity changes no record once the token has bound another key, and does not register the
  // cluster again after a readmission").
  if (options.channel === 'identity' && options.binding !== undefined && options.binding.publicKey === undefined) {
    return refuse(`registration of cluster "${name}" refused: no key is bound since it was removed; restart its agent (with its --token-file) to bind a new key`);
  }
  // Minted only for the key whose inbox the answer goes to, and which the cluster's token was last exchanged for: a
  // copied identity can mint neither for a key whose inbox its holder cannot read nor for the shared bootstrap key,
  // whose inbox every bootstrap holder reads (test/unit/hub/registration.test.ts, "under a cluster's own identity,
  // mints only for the key whose inbox the request is answered on" and "... renews only for the key its token was
  // last exchanged for, and binds that key").
  if (options.channel === 'identity' && request.publicKey !== undefined) {
    if (request.publicKey !== options.requesterKey) {
      return refuse(`registration of cluster "${name}" refused: under a cluster's own identity, an identity is minted only for that identity's key`);
    }
    if (options.binding !== undefined && request.publicKey !== options.binding.publicKey) {
      return refuse(
        `registration of cluster "${name}" refused: its identity is renewed for only the key its bootstrap token was last exchanged for; restart its agent (with its --token-file) to bind a new key`,
      );
    }
  }
  const problem = endpointProblem(request.cluster);
  if (problem) return refuse(`registration of cluster "${name}" refused: ${problem}`);
  // The token binds the key it is exchanged for; with no key stored yet (an agent registered by an earlier version,
  // or the state bucket lost), the first renewal binds its own.
  const bind = request.publicKey !== undefined && request.publicKey !== options.binding?.publicKey ? { bind: { publicKey: request.publicKey, signs: options.proven } } : {};
  const ok: RegisterReply = { schema: MESSAGE_SCHEMA_VERSION, ok: true };
  const moved = existing && (existing.cluster.server !== request.cluster.server || existing.cluster.caPem !== request.cluster.caPem);
  // A token re-points nothing itself, but still binds and mints its key: the agent then re-points the cluster under
  // that identity. Refusing it would let whoever re-pointed the record under a copied identity keep the agent's new
  // key from ever being bound (test/unit/hub/registration.test.ts, 're-points a registered cluster only under its own
  // identity').
  if (moved && options.channel === 'bootstrap' && options.mints) return { write: 'none', reply: ok, ...bind };
  if (moved && options.channel === 'bootstrap') {
    return refuse(
      `registration of cluster "${name}" refused: it is registered with server ${existing.cluster.server} (and its CA); a bootstrap token cannot re-point it. ` +
        `The agent of "${name}" re-points it under its own identity, or an operator removes the record (nats kv del ${Buckets.clusters} ${name}, with the hub's credentials)`,
    );
  }
  // Labels the hub's token file gives a cluster are its labels, whatever its agent says: a member cluster must not
  // label itself into other operators' spans (test/unit/hub/registration.test.ts, "records the labels the hub's token
  // file gives a cluster, not its agent's").
  const labels = options.tokens.find((t) => t.cluster === name && t.labels !== undefined)?.labels;
  const cluster = labels === undefined ? request.cluster : { ...request.cluster, labels: { ...labels } };
  if (existing && sameIdentity(existing.cluster, cluster)) return { write: 'none', reply: ok, ...bind };
  // Every copy of the cluster's identity may send here; only the agent holds the bound key
  // (test/unit/hub/registration.test.ts, "under its own identity, changes the record only when signed with the bound
  // key: a copy of the identity cannot").
  if (options.channel === 'identity' && options.binding?.publicKey !== undefined && options.binding.signs === true && !options.proven) {
    return refuse(
      `registration of cluster "${name}" refused: under its own identity, its record changes only when the request is signed with the key its bootstrap token was last exchanged for; restart its agent (with its --token-file)`,
    );
  }
  const at = options.now.toISOString();
  return {
    write: 'put',
    reply: ok,
    record: { schema: MESSAGE_SCHEMA_VERSION, cluster, registeredAt: existing?.registeredAt ?? at, updatedAt: at },
    ...bind,
  };
}

function sameIdentity(a: ClusterRecord['cluster'], b: ClusterRecord['cluster']): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

function canonical(c: ClusterRecord['cluster']): unknown {
  return { ...c, labels: Object.fromEntries(Object.entries(c.labels).sort(([x], [y]) => (x < y ? -1 : 1))) };
}
