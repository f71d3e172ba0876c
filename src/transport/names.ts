/**
 * Every NATS subject and JetStream KV bucket ControllerMesh uses, in one place (docs/control-plane.md lists them).
 * Names that come from users (clusters, operators, shards) are encoded with `encodeToken` so that a `.`, `/` or
 * any other character can never add a subject token or break a KV key.
 */

/** KV buckets. */
export const Buckets = {
  /** Cluster registry: key `<cluster>` -> ClusterRecord. */
  clusters: 'ctrlmesh-clusters',
  /**
   * Hub state: latest reports (`report.<cluster>`), handovers (`handover.<operator>`) and the latest acknowledged
   * route-table version of each shard (`ack.<operator>.<shard>`), and the clusters removed from the fleet
   * (`removed.<cluster>`).
   */
  state: 'ctrlmesh-state',
  /** Route tables: key `<operator>.<shard>` -> RouteTable. */
  routes: 'ctrlmesh-routes',
  /** The hub leader lease: key `leader`, written with compare-and-set; the bucket's TTL is the lease. */
  hub: 'ctrlmesh-hub',
} as const;
export type BucketName = (typeof Buckets)[keyof typeof Buckets];

const PREFIX = 'ctrlmesh';

/** Subjects; functions take decoded names and encode them. */
export const Subjects = {
  /**
   * Request/reply: an agent without an identity exchanges its bootstrap token (bound to one cluster) for one
   * (RegisterRequest -> RegisterReply, which carries the agent's user JWT when the hub mints identities).
   */
  register: `${PREFIX}.register`,
  /** Request/reply: the agent of a cluster registers it again under its own identity (and may re-point it). */
  registerAs: (cluster: string): string => `${PREFIX}.register.${encodeToken(cluster)}`,
  registerAll: `${PREFIX}.register.*`,
  heartbeat: (cluster: string): string => `${PREFIX}.heartbeat.${encodeToken(cluster)}`,
  heartbeatAll: `${PREFIX}.heartbeat.*`,
  report: (cluster: string): string => `${PREFIX}.report.${encodeToken(cluster)}`,
  reportAll: `${PREFIX}.report.*`,
  /** A proxy acknowledges the route-table version it applied. */
  ack: (operator: string, shard: string): string => `${PREFIX}.ack.${encodeToken(operator)}.${encodeToken(shard)}`,
  ackAll: `${PREFIX}.ack.*.*`,
  /** Request/reply: a proxy renews its shard's lease with the hub leader (RenewRequest -> signed RenewReply). */
  renew: (operator: string, shard: string): string => `${PREFIX}.renew.${encodeToken(operator)}.${encodeToken(shard)}`,
  renewAll: `${PREFIX}.renew.*.*`,
  /**
   * Request/reply: a proxy asks a hub to open a feed of its shard's route table (WatchRequest -> WatchReply). The hub
   * makes the JetStream consumer; the server delivers it on the shard's `feed` subject, which only that proxy (and
   * the hub) may read.
   */
  watchShard: (operator: string, shard: string): string => `${PREFIX}.watch.shard.${encodeToken(operator)}.${encodeToken(shard)}`,
  /** Request/reply: the agent of a cluster asks for a feed of the route tables or the stored acknowledgements. */
  watchCluster: (cluster: string): string => `${PREFIX}.watch.cluster.${encodeToken(cluster)}`,
  watchAll: `${PREFIX}.watch.>`,
  /** Where the feed asked for on `watchSubject` under `id` is delivered. */
  feed: (watchSubject: string, id: string): string => `${PREFIX}.feed.${watchSubject.slice(`${PREFIX}.watch.`.length)}.${id}`,
  /** Every feed of the requester of `watchSubject`: what it may subscribe to. */
  feedsOf: (watchSubject: string): string => `${PREFIX}.feed.${watchSubject.slice(`${PREFIX}.watch.`.length)}.>`,
} as const;

/** Keys inside the buckets. */
export const Keys = {
  cluster: (cluster: string): string => encodeToken(cluster),
  route: (operator: string, shard: string): string => `${encodeToken(operator)}.${encodeToken(shard)}`,
  routesOf: (operator: string): string => `${encodeToken(operator)}.*`,
  report: (cluster: string): string => `report.${encodeToken(cluster)}`,
  reportAll: 'report.*',
  handover: (operator: string): string => `handover.${encodeToken(operator)}`,
  handoverAll: 'handover.*',
  ack: (operator: string, shard: string): string => `ack.${encodeToken(operator)}.${encodeToken(shard)}`,
  ackAll: 'ack.*.*',
  /** A cluster removed from the fleet (state bucket): its registrations are refused until the key is deleted. */
  removal: (cluster: string): string => `removed.${encodeToken(cluster)}`,
  removalAll: 'removed.*',
  /** The key a cluster's agent renews its identity for (state bucket): the one its last bootstrap was minted for. */
  agentKey: (cluster: string): string => `agentkey.${encodeToken(cluster)}`,
  agentKeyAll: 'agentkey.*',
  /** A malformed value the hub leader copied aside before replacing it (state bucket): `quarantine.<key>.<revision>`. */
  quarantine: (key: string, revision: number): string => `quarantine.${key}.${revision}`,
  leader: 'leader',
} as const;

/** What a token cannot hold as it is: anything but letters, digits, `_` and `-` (a character, not a UTF-16 unit). */
const UNSAFE = /[^A-Za-z0-9_-]/gu;

const escapeByte = (byte: number): string => `=${byte.toString(16).toUpperCase().padStart(2, '0')}`;
/** The escapes of ASCII, made once: names escape little else (the `/` of namespace/name, dots). */
const ASCII_ESCAPES = Array.from({ length: 0x80 }, (_, code) => escapeByte(code));

const escapeCharacter = (character: string): string => {
  if (character.length === 1 && character.charCodeAt(0) < 0x80) return ASCII_ESCAPES[character.charCodeAt(0)]!;
  let out = '';
  for (const byte of Buffer.from(character, 'utf8')) out += escapeByte(byte);
  return out;
};

/**
 * Encodes a name as one NATS token that is also a valid KV key part: letters, digits, `_` and `-` are kept,
 * every other UTF-8 byte becomes `=XX` (upper-case hex). Reversible by `decodeToken`; the empty string is `=`.
 */
export function encodeToken(name: string): string {
  return name === '' ? '=' : name.replace(UNSAFE, escapeCharacter);
}

/** Inverse of `encodeToken`; returns undefined for a string `encodeToken` cannot have produced. */
export function decodeToken(token: string): string | undefined {
  if (token === '=') return '';
  if (!/^(?:[A-Za-z0-9_-]|=[0-9A-F]{2})+$/.test(token)) return undefined;
  const bytes: number[] = [];
  for (let i = 0; i < token.length; ) {
    if (token[i] === '=') {
      bytes.push(Number.parseInt(token.slice(i + 1, i + 3), 16));
      i += 3;
    } else {
      bytes.push(token.charCodeAt(i));
      i += 1;
    }
  }
  const decoded = Buffer.from(bytes).toString('utf8');
  return encodeToken(decoded) === token ? decoded : undefined;
}
