import { Buckets, Keys, Subjects } from '../names.js';

/**
 * What each role may publish and subscribe to, enforced by the NATS server (the permissions go into the role's
 * user JWT). A receiver still checks that a message's subject matches its body, but no longer has to trust it:
 * an agent cannot send another cluster's reports, a proxy cannot acknowledge for another shard, and only the hub
 * writes KV (registry, state, route tables, the leader lease).
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

const JS_API = '$JS.API';
const kvStream = (bucket: string): string => `KV_${bucket}`;
const kvSubject = (bucket: string, key: string): string => `$KV.${bucket}.${key}`;

/**
 * Enough to open a bucket and follow `key` (a key or a wildcard) with an ordered consumer, nothing more. No gets:
 * a KV get names its key in the request body, where permissions cannot see it.
 */
function kvRead(bucket: string, key: string): string[] {
  const stream = kvStream(bucket);
  return [
    `${JS_API}.STREAM.INFO.${stream}`,
    // The consumer's filter is part of the subject, and the server checks it against the request's own filter:
    // a consumer on other keys cannot be created.
    `${JS_API}.CONSUMER.CREATE.${stream}.*.${kvSubject(bucket, key)}`,
    // Flow-control replies of the ordered consumer.
    `$JS.FC.${stream}.>`,
  ];
}

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
    case 'agent':
      return {
        publish: [
          Subjects.heartbeat(identity.cluster),
          Subjects.report(identity.cluster),
          Subjects.registerAs(identity.cluster),
          // Every table: the agent writes the status of the ShardingConfigs whose shards serve its cluster.
          ...kvRead(Buckets.routes, '>'),
          // The stored acknowledgements (and nothing else of the hub's state): which proxies applied which rules.
          ...kvRead(Buckets.state, Keys.ackAll),
        ],
        subscribe: [inbox],
      };
    case 'proxy':
      return {
        publish: [Subjects.ack(identity.operator, identity.shard), Subjects.renew(identity.operator, identity.shard), ...kvRead(Buckets.routes, Keys.route(identity.operator, identity.shard))],
        subscribe: [inbox],
      };
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
