import type { Msg } from '@nats-io/transport-node';
import { PROOF_HEADER, messageProvenAt, type AgentKey } from '../transport/index.js';

/** When `msg` was signed with `publicKey`, if just now (message-proof.ts); undefined for no key or no valid proof. */
export function provenAt(publicKey: string | undefined, msg: Msg, now: number): number | undefined {
  return publicKey === undefined ? undefined : messageProvenAt(publicKey, msg.subject, msg.data, msg.headers?.get(PROOF_HEADER), new Date(now));
}

/** Whether a message sent under a cluster's identity counts, and if not, why. */
export type ProofVerdict = 'counts' | 'unsigned' | 'replayed';

/** The log line of a `kind` of message (a report, a heartbeat) dropped for its proof. */
export function proofDropped(kind: string, verdict: Exclude<ProofVerdict, 'counts'>): string {
  return verdict === 'unsigned'
    ? `dropped a ${kind} not signed with the key the cluster's token was last bound to`
    : `dropped a ${kind} signed no later than the last one taken`;
}

/**
 * The messages of one kind (reports, heartbeats) sent under clusters' identities that count. Once a cluster's key
 * signs (its token was last exchanged signed), only a message signed with that key counts, and only when signed later
 * than the last one taken: a proof holds for minutes, and a replayed report would roll the stored one back, a
 * replayed heartbeat keep a dead agent's cluster Ready. Kept by each hub on its own: a new one starts afresh.
 */
export class LatestProofs {
  private readonly last = new Map<string, number>();

  constructor(private readonly now: () => number) {}

  judge(binding: AgentKey | undefined, msg: Msg): ProofVerdict {
    if (binding?.signs !== true) return 'counts';
    const signedAt = provenAt(binding.publicKey, msg, this.now());
    if (signedAt === undefined) return 'unsigned';
    if (signedAt <= (this.last.get(binding.cluster) ?? -Infinity)) return 'replayed';
    this.last.set(binding.cluster, signedAt);
    return 'counts';
  }
}
