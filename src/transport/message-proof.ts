import { ed25519Signer, ed25519Verify, type Ed25519Signer } from './ed25519.js';

/**
 * The NATS header that carries an agent's signature of a message with its own key. NATS proves which identity sent
 * a message (its subject), not which key: every copy of an identity holds the same JWT, but only the agent holds the
 * key its cluster's token was last bound to (test/integration/reply-injection.test.ts). A header rather than a field,
 * so that hubs of an earlier version, which refuse unknown fields, still read the message.
 */
export const PROOF_HEADER = 'Ctrlmesh-Proof';

/** How far a proof's time may lie from the receiver's: a proof replayed later than that proves nothing. */
export const PROOF_SKEW_MS = 5 * 60_000;

/** The header's value: the time it was signed (ISO 8601, ms) and the base64 ed25519 signature, one space between. */
const PROOF = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z) ([A-Za-z0-9+/]{86}==)$/u;

/**
 * What is signed: the subject (a proof holds on no other), the time, and the message's exact bytes. It holds newlines,
 * so no NATS login nonce the agent signs with the same key can be one (`signableNonce`).
 */
const signed = (subject: string, signedAt: string, data: Uint8Array): Buffer =>
  Buffer.concat([Buffer.from(`CtrlmeshProof\n${subject}\n${signedAt}\n`, 'utf8'), data]);

/** The signer of each seed in use: deriving one checks the seed in JavaScript, too dear for every heartbeat. */
const signers = new WeakMap<Uint8Array, Ed25519Signer>();

/** Signs a message sent on `subject` with an nkey seed, at `now`: the value of PROOF_HEADER. */
export function proveMessage(seed: Uint8Array, subject: string, data: Uint8Array, now: Date): string {
  const signedAt = now.toISOString();
  let signer = signers.get(seed);
  if (signer === undefined) {
    signer = ed25519Signer(new TextDecoder().decode(seed));
    signers.set(seed, signer);
  }
  return `${signedAt} ${signer.sign(signed(subject, signedAt, data)).toString('base64')}`;
}

/**
 * When the message was signed (ms), if `proof` (PROOF_HEADER's value) is `publicKey`'s signature of it made within
 * PROOF_SKEW_MS of `now`; undefined otherwise. The time lets a receiver refuse a replayed message older than the last.
 */
export function messageProvenAt(publicKey: string, subject: string, data: Uint8Array, proof: string | undefined, now: Date): number | undefined {
  const parts = proof === undefined ? null : PROOF.exec(proof);
  // A time that is no date (month 13) parses as NaN, which no comparison rejects
  // (test/unit/transport/message-proof.test.ts, "hold for the signer's key over the exact bytes on that subject, and
  // for nothing else").
  const signedAt = parts ? Date.parse(parts[1]!) : Number.NaN;
  if (!parts || !Number.isFinite(signedAt) || new Date(signedAt).toISOString() !== parts[1] || Math.abs(signedAt - now.getTime()) > PROOF_SKEW_MS) return undefined;
  try {
    return ed25519Verify(publicKey, signed(subject, parts[1]!, data), Buffer.from(parts[2]!, 'base64')) ? signedAt : undefined;
  } catch {
    return undefined;
  }
}

/** A login nonce as nats-server makes them: base64url, short, no newline. */
const NONCE = /^[A-Za-z0-9_-]{1,64}$/u;

/**
 * Whether a NATS server's login nonce may be signed with a key that also signs proofs: a server the agent is made to
 * connect to (advertised, or in the middle) could otherwise send a proof's text as its nonce and have it signed
 * (test/unit/transport/message-proof.test.ts, 'a proof is no login nonce: the agent signs nonces only as nats-server
 * makes them').
 */
export function signableNonce(nonce: string | undefined): boolean {
  return nonce === undefined || NONCE.test(nonce);
}
