import { Subjects } from '../names.js';

/**
 * What each role may publish and subscribe to, enforced by the NATS server (the permissions go into the role's
 * user JWT). A receiver still checks that a message's subject matches its body, but no longer has to trust it:
 * an agent cannot send another cluster's reports, a proxy cannot acknowledge for another shard, and only the hub
 * writes KV (registry, state, route tables, the leader lease). Only the hub uses the JetStream API: the server
 * delivers and answers wherever a request says (a consumer's deliver subject, any request's reply subject) without
 * checking the requester's permissions, so agents and proxies read KV through feeds a hub opens for them
 * (src/transport/feed-server.ts).
 */
export interface SubjectPermissions {
  publish: string[];
  subscribe: string[];
}

/** The identities of the control plane. */
export type Role =
  | { role: 'hub' }
  /** Shared by agents that have not registered yet: it can only ask to register. */
  | { role: 'bootstrap' }
  | { role: 'agent'; cluster: string }
  | { role: 'proxy'; operator: string; shard: string };

/** The prefix of an identity's reply inboxes (see inboxPrefixFor): the only inbox it may subscribe to. */
export function inboxOf(publicKey: string): string {
  return `_INBOX_${publicKey}`;
}

/**
 * The permissions of a role for the user whose public key is `publicKey`; `undefined` means everything in the
 * account (the hub).
 */
export function permissionsFor(identity: Role, publicKey: string): SubjectPermissions | undefined {
  const inbox = `${inboxOf(publicKey)}.>`;
  switch (identity.role) {
    case 'hub':
      return undefined;
    case 'bootstrap':
      return { publish: [Subjects.register], subscribe: [inbox] };
    case 'agent': {
      const watch = Subjects.watchCluster(identity.cluster);
      return {
        // Every table (the agent writes the status of the ShardingConfigs whose shards serve its cluster) and the
        // stored acknowledgements (which proxies applied which rules), through the feeds a hub opens for it.
        publish: [Subjects.heartbeat(identity.cluster), Subjects.report(identity.cluster), Subjects.registerAs(identity.cluster), watch],
        subscribe: [inbox, Subjects.feedsOf(watch)],
      };
    }
    case 'proxy': {
      const watch = Subjects.watchShard(identity.operator, identity.shard);
      return {
        publish: [Subjects.ack(identity.operator, identity.shard), Subjects.renew(identity.operator, identity.shard), watch],
        subscribe: [inbox, Subjects.feedsOf(watch)],
      };
    }
  }
}

/** A user name that says what the identity is, as `nats server report connections` shows it. */
export function userName(identity: Role): string {
  switch (identity.role) {
    case 'hub':
    case 'bootstrap':
      return `ctrlmesh-${identity.role}`;
    case 'agent':
      return `ctrlmesh-agent-${identity.cluster}`;
    case 'proxy':
      return `ctrlmesh-proxy-${identity.operator}-${identity.shard}`;
  }
}
