import { ed25519Signer, ed25519Verify } from './ed25519.js';
import type { ClusterIdentity } from './messages.js';

/**
 * What an agent registers under its own identity, signed with its key: the NATS header that carries it. A header
 * rather than a field of the RegisterRequest, so that hubs of an earlier version, which refuse unknown fields, still
 * read the request.
 */
export const PROOF_HEADER = 'Ctrlmesh-Registration-Proof';

/** How far a proof's time may lie from the hub's: a proof replayed later than that changes nothing. */
export const PROOF_SKEW_MS = 5 * 60_000;

/** The header's value: the time it was signed (ISO 8601) and the base64 ed25519 signature, a space between. */
const PROOF = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z) ([A-Za-z0-9+/]{86}==)$/u;

/** A cluster's identity in one order (labels sorted), whatever order its fields came in. */
export function canonicalCluster(c: ClusterIdentity): ClusterIdentity {
  return { name: c.name, labels: Object.fromEntries(Object.entries(c.labels).sort(([x], [y]) => (x < y ? -1 : 1))), server: c.server, caPem: c.caPem };
}

const signed = (cluster: ClusterIdentity, signedAt: string): Buffer => Buffer.from(`RegistrationProof\n${signedAt}\n${JSON.stringify(canonicalCluster(cluster))}`, 'utf8');

/** Signs what an agent registers with its own key (its nkey seed), at `now`: the value of PROOF_HEADER. */
export function proveRegistration(seed: Uint8Array, cluster: ClusterIdentity, now: Date): string {
  const signedAt = now.toISOString();
  return `${signedAt} ${ed25519Signer(new TextDecoder().decode(seed)).sign(signed(cluster, signedAt)).toString('base64')}`;
}

/**
 * Whether `proof` (PROOF_HEADER's value) is `publicKey`'s signature over `cluster`, made within PROOF_SKEW_MS of
 * `now`. NATS proves which identity sent a message (its subject), not which key: every copy of an identity holds the
 * same JWT, but only the agent holds the key its token was last bound to (attacker probe, session 23).
 */
export function registrationProven(publicKey: string, cluster: ClusterIdentity, proof: string | undefined, now: Date): boolean {
  const parts = proof === undefined ? null : PROOF.exec(proof);
  if (!parts || Math.abs(Date.parse(parts[1]!) - now.getTime()) > PROOF_SKEW_MS) return false;
  try {
    return ed25519Verify(publicKey, signed(cluster, parts[1]!), Buffer.from(parts[2]!, 'base64'));
  } catch {
    return false;
  }
}
