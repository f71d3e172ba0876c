import {
  bucketOf,
  compileSelector,
  createHashSettings,
  matches,
  mergeSelectors,
  ownedSelector,
  parseSelector,
  renderSelector,
  type HashSettings,
  type Requirements,
} from '../../sharding/index.js';
import type { ClusterRoute, RouteTable } from '../../transport/index.js';

interface CompiledLimit {
  groups: ReadonlySet<string>;
  resources: ReadonlySet<string>;
  requirements: Requirements;
}

/**
 * What one shard may see and touch in one cluster, compiled once per route table: the owned buckets, the label
 * selector the proxy injects per resource (rendered once and memoised), and the checks for single objects and
 * watch events.
 */
export class ClusterShardView {
  readonly name: string;
  readonly owned: ReadonlySet<number>;
  private readonly settings: HashSettings;
  private readonly owns: Requirements;
  private readonly limits: CompiledLimit[];
  private readonly owners: ReadonlyMap<number, string>;
  private readonly selectors = new Map<string, { requirements: Requirements; rendered: string }>();
  private readonly namespaceBuckets = new Map<string, number>();

  constructor(options: { table: RouteTable; route: ClusterRoute; fenced: boolean }) {
    const { table, route, fenced } = options;
    this.name = route.name;
    this.settings = createHashSettings({ algorithm: table.hashAlgorithm, bucketCount: table.bucketCount, labels: table.labels });
    this.owned = new Set(fenced ? [] : route.buckets);
    // Nothing owned gives `key,!key`: valid yet matching nothing, so such a shard gets a real (empty) list or watch.
    this.owns = ownedSelector({ buckets: [...this.owned].sort((a, b) => a - b), settings: this.settings }).requirements;
    this.limits = route.limits.map((limit) => ({
      groups: new Set(limit.relateResources.flatMap((r) => r.apiGroups)),
      resources: new Set(limit.relateResources.flatMap((r) => r.resources)),
      requirements: compileSelector(limit.selector),
    }));
    this.owners = new Map(Object.entries(route.bucketOwners ?? {}).map(([bucket, shard]) => [Number(bucket), shard]));
  }

  get ownsNothing(): boolean {
    return this.owned.size === 0;
  }

  /** The selector injected into lists and watches of `group/resource`: owned buckets AND the limits naming it. */
  selectorFor(group: string, resource: string): string {
    return this.shardSelector(group, resource).rendered;
  }

  /**
   * The selector to send for a list or watch: the shard's AND the client's, parsed and rendered again so the API
   * server reads exactly the requirements the proxy judged (text appended to an unbalanced `in (` could otherwise
   * be read as part of the client's). Throws SelectorSyntaxError for a client selector it cannot parse.
   */
  selectorWith(group: string, resource: string, client: string | undefined): string {
    const shard = this.shardSelector(group, resource);
    if (client === undefined || client.trim() === '') return shard.rendered;
    return renderSelector(mergeSelectors(shard.requirements, parseSelector(client)).requirements);
  }

  private shardSelector(group: string, resource: string): { requirements: Requirements; rendered: string } {
    const key = `${group}/${resource}`;
    let selector = this.selectors.get(key);
    if (selector === undefined) {
      const limits = this.limitsFor(group, resource).map((l) => l.requirements);
      const requirements = limits.length === 0 ? this.owns : mergeSelectors(this.owns, ...limits).requirements;
      selector = { requirements, rendered: renderSelector(requirements) };
      this.selectors.set(key, selector);
    }
    return selector;
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

  /** Whether an object (by its labels) belongs to this shard: the test applied to watch events. */
  admits(group: string, resource: string, labels: Readonly<Record<string, string>>): boolean {
    const hash = labels[this.settings.labels.hash];
    // Text, as the injected selector compares it: "01", "1e0" or "" are no bucket, though Number() reads them as one.
    if (hash === undefined || !/^(0|[1-9][0-9]*)$/.test(hash) || !this.owned.has(Number(hash))) return false;
    return this.limitsFor(group, resource).every((limit) => matches(limit.requirements, labels));
  }

  private limitsFor(group: string, resource: string): CompiledLimit[] {
    return this.limits.filter(
      (l) => (l.groups.has('*') || l.groups.has(group)) && (l.resources.has('*') || l.resources.has(resource)),
    );
  }
}
