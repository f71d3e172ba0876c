import {
  NAMESPACE_FIELD,
  UID_FIELD,
  bucketOf,
  compileSelector,
  createHashSettings,
  fnvBucket,
  matches,
  meshLabels,
  mergeSelectors,
  ownedSelector,
  parseSelector,
  rangeSelector,
  renderSelector,
  renderShardSelector,
  type HashSettings,
  type ObjectSelection,
  type Requirements,
} from '../../sharding/index.js';
import type { ClusterRoute, RouteTable } from '../../transport/index.js';

/** What an object shows the shard's checks: its labels and where it lives. */
export interface ObjectMetadata {
  readonly labels?: Readonly<Record<string, string>>;
  readonly namespace?: string;
  readonly name?: string;
  readonly uid?: string;
  readonly resourceVersion?: string;
}

/** How the proxy keeps a list or watch of one resource to the shard, compiled once per route table. */
export interface ResourceSelection {
  /** Injected as `labelSelector` (ANDed with the client's); empty requirements inject none. */
  readonly labels: Requirements;
  /** Sent as `shardSelector`, in the API server's own spelling: a list answer must echo exactly this. */
  readonly shardSelector: string | undefined;
  /** Nothing labelled and no server-side filter: the proxy filters list answers itself. */
  readonly filterLists: boolean;
  /** What a watch was opened with: a route table that changes it ends the watch. */
  readonly key: string;
}

/**
 * Objects no list or watch shows, told by name (the MeshObjects of the table): every shard's renamed leader-election
 * lock and the mesh's credential Secrets.
 */
export interface HiddenObjects {
  /** Whether lists and watches of this resource may carry a hidden object. */
  hiddenIn(group: string, resource: string): boolean;
  /** Whether an object is hidden (a shard's renamed lock, this shard's own included; a mesh Secret). */
  hides(object: ObjectMetadata): boolean;
}

/**
 * How watch events of one resource are judged under one route table, built once per table (the watch registry
 * hands each open watch the current table's): the filter reads only `labelKeys` of an event (and the namespace,
 * name and uid) and asks `admits`.
 */
export interface EventJudge {
  /**
   * False where the API server applies everything `admits` checks (label selectors: the hash label and the limits)
   * and the watch carries the current table's selector, as every open watch does: events pass unread. True where
   * the server filters by range (the proxy's second line of defence), or not at all.
   */
  readonly mustJudge: boolean;
  /**
   * Whether a list the API server answered with the shard selector echoed may pass unread: false where `admits`
   * also reads names (a resource that may hold another shard's renamed lock), which no server selector checks.
   */
  readonly echoSuffices: boolean;
  /** The label keys `admits` reads. */
  readonly labelKeys: readonly string[];
  /** Whether the shard may see the object (ADDED, MODIFIED): its unit owned, and the limits' selectors matched. */
  admits(object: ObjectMetadata): boolean;
  /**
   * Whether the object's unit (its namespace's bucket, or its uid's) is the shard's: what a DELETED event is judged
   * by. The limits are not read: the API server sends DELETED, with the new labels, for an object that left their
   * selector, and the shard must forget it.
   */
  owns(object: ObjectMetadata): boolean;
}

/**
 * What a list or watch of one resource carries under one table: its units (the owned buckets) and everything else
 * its selector depends on (hash settings, how the cluster selects, the limits), as text.
 */
export interface CarriedUnits {
  readonly buckets: ReadonlySet<number>;
  readonly rest: string;
}

interface ResourceSet {
  groups: ReadonlySet<string>;
  resources: ReadonlySet<string>;
}

interface CompiledLimit extends ResourceSet {
  requirements: Requirements;
}

function resourceSet(groups: readonly { apiGroups: string[]; resources: string[] }[]): ResourceSet {
  return { groups: new Set(groups.flatMap((r) => r.apiGroups)), resources: new Set(groups.flatMap((r) => r.resources)) };
}

/** What one table compiles once per resource (selection, event judge, carried units): looked up, or made and kept. */
function perResource<T>(memo: Map<string, T>, group: string, resource: string, make: () => T): T {
  const key = `${group}/${resource}`;
  let value = memo.get(key);
  if (value === undefined) {
    value = make();
    memo.set(key, value);
  }
  return value;
}

/** The namespace an object's bucket is read from: a Namespace's own name, else its namespace ('' for none). */
function namespaceOf(group: string, resource: string, object: ObjectMetadata): string {
  return (group === '' && resource === 'namespaces' ? object.name : object.namespace) ?? '';
}

function names(set: ResourceSet, group: string, resource: string): boolean {
  return (set.groups.has('*') || set.groups.has(group)) && (set.resources.has('*') || set.resources.has(resource));
}

/**
 * What one shard may see and touch in one cluster, compiled once per route table: the owned buckets, the label
 * selector the proxy injects per resource (rendered once and memoised), and the checks for single objects and
 * watch events.
 */
export class ClusterShardView {
  readonly name: string;
  readonly owned: ReadonlySet<number>;
  readonly selection: ObjectSelection;
  private readonly settings: HashSettings;
  private readonly owns: Requirements;
  private readonly nothing: Requirements;
  private readonly limits: CompiledLimit[];
  private readonly byObject: ResourceSet | undefined;
  private readonly unsharded: ResourceSet | undefined;
  private readonly owners: ReadonlyMap<number, string>;
  private readonly selections = new Map<string, ResourceSelection>();
  private readonly judges = new Map<string, EventJudge>();
  private readonly carried = new Map<string, CarriedUnits>();
  private readonly namespaceBuckets = new Map<string, number>();
  private readonly hiddenObjects: HiddenObjects | undefined;

  constructor(options: { table: RouteTable; route: ClusterRoute; fenced: boolean; hidden?: HiddenObjects | undefined }) {
    const { table, route, fenced } = options;
    this.name = route.name;
    this.hiddenObjects = options.hidden;
    this.settings = createHashSettings({ algorithm: table.hashAlgorithm, bucketCount: table.bucketCount, labels: table.labels });
    this.owned = new Set(fenced ? [] : route.buckets);
    // Ranges need buckets that are hash ranges: a table naming shard selectors with another hash is filtered here.
    const selection = route.selection ?? 'labels';
    this.selection = selection === 'shardSelector' && this.settings.algorithm !== 'fnv-range' ? 'proxyFilter' : selection;
    // Nothing owned gives `key,!key`: valid yet matching nothing, so such a shard gets a real (empty) list or watch.
    this.owns = ownedSelector({ buckets: [...this.owned].sort((a, b) => a - b), settings: this.settings }).requirements;
    this.nothing = ownedSelector({ buckets: [], settings: this.settings }).requirements;
    this.limits = route.limits.map((limit) => ({ ...resourceSet(limit.relateResources), requirements: compileSelector(limit.selector) }));
    this.byObject = route.objectSharding && route.objectSharding.length > 0 ? resourceSet(route.objectSharding) : undefined;
    this.unsharded = route.unshardedWrites && route.unshardedWrites.length > 0 ? resourceSet(route.unshardedWrites) : undefined;
    this.owners = new Map(Object.entries(route.bucketOwners ?? {}).map(([bucket, shard]) => [Number(bucket), shard]));
  }

  get ownsNothing(): boolean {
    return this.owned.size === 0;
  }

  /** What a watch of `group/resource` is opened with (the watch registry compares it across tables). */
  selectorFor(group: string, resource: string): string {
    return this.selectionFor(group, resource).key;
  }

  /**
   * The label selector to send for a list or watch: the shard's AND the client's, parsed and rendered again so the
   * API server reads exactly the requirements the proxy judged (text appended to an unbalanced `in (` could otherwise
   * be read as part of the client's). Empty when neither has any. Throws SelectorSyntaxError for a client selector
   * it cannot parse.
   */
  selectorWith(group: string, resource: string, client: string | undefined): string {
    const shard = this.selectionFor(group, resource).labels;
    if (client === undefined || client.trim() === '') return renderSelector(shard);
    return renderSelector(mergeSelectors(shard, parseSelector(client)).requirements);
  }

  selectionFor(group: string, resource: string): ResourceSelection {
    return perResource(this.selections, group, resource, () => this.compileSelection(group, resource));
  }

  /** How watch events of `group/resource` are judged under this table (memoised: one object per table). */
  eventJudge(group: string, resource: string): EventJudge {
    return perResource(this.judges, group, resource, () => {
      const selection = this.selectionFor(group, resource);
      const byObject = this.shardsByObject(group, resource);
      const limits = this.limitsFor(group, resource);
      const keys = new Set(limits.flatMap((limit) => limit.requirements.map((r) => r.key)));
      if (this.selection === 'labels' && !byObject) keys.add(this.settings.labels.hash);
      // Other shards' locks and the mesh's Secrets are told by name: every list and watch of their resources is read and judged.
      const hides = this.hiddenObjects?.hiddenIn(group, resource) === true;
      return {
        mustJudge: selection.shardSelector !== undefined || selection.filterLists || hides,
        echoSuffices: !hides,
        labelKeys: [...keys].sort(),
        admits: (object: ObjectMetadata) => this.judgeObject(group, resource, byObject, limits, object),
        owns: (object: ObjectMetadata) => this.ownsUnitOf(group, resource, byObject, object),
      };
    });
  }

  /** What a watch of `group/resource` opened under this table carries (compared across tables by the registry). */
  carries(group: string, resource: string): CarriedUnits {
    return perResource(this.carried, group, resource, () => {
      const limits = this.limitsFor(group, resource).map((l) => l.requirements);
      const { algorithm, bucketCount, labels } = this.settings;
      const how = `${this.selection} ${this.shardsByObject(group, resource) ? 'uid' : 'namespace'}`;
      const rest = [algorithm, bucketCount, labels.hash, labels.namespace, labels.control, how, renderSelector(limits.length === 0 ? [] : mergeSelectors(...limits).requirements)].join('\n');
      return { buckets: this.owned, rest };
    });
  }

  private compileSelection(group: string, resource: string): ResourceSelection {
    const limits = this.limitsFor(group, resource).map((l) => l.requirements);
    if (this.shardsByObject(group, resource)) return this.compileObjectSelection(limits);
    const labelled = (labels: Requirements, shardSelector?: string, filterLists = false): ResourceSelection => {
      const text = renderSelector(labels);
      const key = shardSelector !== undefined ? `${text}\n${shardSelector}` : filterLists ? `${text}\nbuckets ${[...this.owned].sort((a, b) => a - b).join(',')}` : text;
      return { labels, shardSelector, filterLists, key };
    };
    if (this.selection === 'labels') return labelled(limits.length === 0 ? this.owns : mergeSelectors(this.owns, ...limits).requirements);
    const { ranges, labels } = rangeSelector({ buckets: this.owned, limits: limits.length === 0 ? [] : mergeSelectors(...limits).requirements, settings: this.settings });
    // Nothing can match: `key,!key` needs no label on any object to match nothing, and nothing needs checking.
    if (ranges.length === 0) return labelled(this.nothing);
    // A Namespace has no namespace to hash (the server hashes ""): the proxy judges Namespaces by name itself.
    if (this.selection === 'proxyFilter' || (group === '' && resource === 'namespaces')) return labelled(labels, undefined, true);
    return labelled(labels, renderShardSelector(NAMESPACE_FIELD, ranges));
  }

  /**
   * A resource sharded by uid: its buckets are uid-hash ranges. The server can filter by them (never by a namespace
   * requirement at the same time: one field per selector), so a limit naming namespaces leaves the list to the proxy.
   */
  private compileObjectSelection(limits: Requirements[]): ResourceSelection {
    const merged = limits.length === 0 ? [] : mergeSelectors(...limits).requirements;
    const onNamespace = merged.filter((r) => r.key === this.settings.labels.namespace);
    const rest = merged.filter((r) => r.key !== this.settings.labels.namespace);
    const { ranges, labels } = rangeSelector({ buckets: this.owned, limits: rest, settings: this.settings });
    const text = renderSelector(ranges.length === 0 ? this.nothing : labels);
    if (ranges.length === 0) return { labels: this.nothing, shardSelector: undefined, filterLists: false, key: text };
    if (this.selection === 'shardSelector' && onNamespace.length === 0) {
      const shardSelector = renderShardSelector(UID_FIELD, ranges);
      return { labels, shardSelector, filterLists: false, key: `${text}\n${shardSelector}` };
    }
    return { labels, shardSelector: undefined, filterLists: true, key: `${text}\nobjects ${[...this.owned].sort((a, b) => a - b).join(',')}` };
  }

  /** Whether this resource's objects are sharded one by one, by uid (`spec.objectSharding`). */
  shardsByObject(group: string, resource: string): boolean {
    return this.byObject !== undefined && names(this.byObject, group, resource);
  }

  /** The bucket of an object sharded by uid: the fnv bucket of the uid's text, as the API server hashes it. */
  objectBucketOf(uid: string): number {
    return fnvBucket(uid, this.settings.bucketCount);
  }

  /**
   * Whether the ShardingConfig lets its shards write this resource though its objects belong to no bucket
   * (`spec.unshardedWrites`): a subresource only where it is named as `resource/subresource`.
   */
  mayWriteUnsharded(group: string, resource: string, subresource?: string): boolean {
    return this.unsharded !== undefined && names(this.unsharded, group, subresource === undefined ? resource : `${resource}/${subresource}`);
  }

  /** True if some limit names this resource (then even a cluster-scoped resource is sharded). */
  limited(group: string, resource: string): boolean {
    return this.limitsFor(group, resource).length > 0;
  }

  bucketOf(namespace: string): number {
    let bucket = this.namespaceBuckets.get(namespace);
    if (bucket === undefined) {
      bucket = bucketOf(namespace, this.settings);
      this.namespaceBuckets.set(namespace, bucket);
    }
    return bucket;
  }

  ownsNamespace(namespace: string): boolean {
    return this.owned.has(this.bucketOf(namespace));
  }

  ownerOf(bucket: number): string | undefined {
    return this.owners.get(bucket);
  }

  /**
   * Whether an object belongs to this shard: the test applied to watch events and to lists the proxy filters. Where
   * objects are labelled it reads the hash label, as the injected selector does; elsewhere it reads the bucket of
   * the object's namespace (a Namespace's own name), and the limits see the labels that namespace would give.
   */
  admits(group: string, resource: string, object: ObjectMetadata): boolean {
    return this.judgeObject(group, resource, this.shardsByObject(group, resource), this.limitsFor(group, resource), object);
  }

  /** Whether the unit of an object is owned: its uid's bucket, or its namespace's (a Namespace's own name). */
  private ownsUnitOf(group: string, resource: string, byObject: boolean, object: ObjectMetadata): boolean {
    if (this.hidden(group, resource, object)) return false;
    if (byObject) return typeof object.uid === 'string' && object.uid !== '' && this.owned.has(this.objectBucketOf(object.uid));
    return this.ownsNamespace(namespaceOf(group, resource, object));
  }

  /** A shard's renamed lock or a mesh Secret: no list or watch shows it (proxy.md, "The operator's namespace"). */
  private hidden(group: string, resource: string, object: ObjectMetadata): boolean {
    return this.hiddenObjects !== undefined && this.hiddenObjects.hiddenIn(group, resource) && this.hiddenObjects.hides(object);
  }

  private judgeObject(group: string, resource: string, byObject: boolean, limits: readonly CompiledLimit[], object: ObjectMetadata): boolean {
    if (this.hidden(group, resource, object)) return false;
    const labels = object.labels ?? {};
    if (byObject) {
      if (typeof object.uid !== 'string' || object.uid === '') return false;
      const bucket = this.objectBucketOf(object.uid);
      if (!this.owned.has(bucket)) return false;
      const namespace = object.namespace ?? '';
      const seen = { ...labels, ...meshLabels(namespace, this.settings), [this.settings.labels.hash]: String(bucket) };
      return limits.every((limit) => matches(limit.requirements, seen));
    }
    if (this.selection === 'labels') {
      const hash = labels[this.settings.labels.hash];
      // Text, as the injected selector compares it: "01", "1e0" or "" are no bucket, though Number() reads them as one.
      if (hash === undefined || !/^(0|[1-9][0-9]*)$/.test(hash) || !this.owned.has(Number(hash))) return false;
      return limits.every((limit) => matches(limit.requirements, labels));
    }
    const namespace = namespaceOf(group, resource, object);
    if (!this.ownsNamespace(namespace)) return false;
    if (limits.length === 0) return true;
    const seen = { ...labels, ...meshLabels(namespace, this.settings) };
    return limits.every((limit) => matches(limit.requirements, seen));
  }

  private limitsFor(group: string, resource: string): CompiledLimit[] {
    return this.limits.filter((l) => names(l, group, resource));
  }
}
