import type { LabelSelector } from '../api/index.js';
import { bucketOf, compileSelector, matches, renderSelector } from '../sharding/index.js';
import type { ClusterRoute, RouteTable } from '../transport/index.js';

/** The pure sharding functions the proxy applies (from src/sharding), passed in so this module stays small. */
export interface ShardFunctions {
  bucketOf(namespace: string, algorithm: RouteTable['hashAlgorithm'], bucketCount: number): number;
  renderSelector(selector: LabelSelector): string;
  /** Compiles a selector once into a test applied to each watch event. */
  compileMatcher(selector: LabelSelector): (labels: Readonly<Record<string, string>>) => boolean;
}

/** The functions of src/sharding, as the proxy applies them. */
export const shardFunctions: ShardFunctions = Object.freeze({
  bucketOf: (namespace: string, algorithm: RouteTable['hashAlgorithm'], bucketCount: number) => bucketOf(namespace, { algorithm, bucketCount }),
  renderSelector: (selector: LabelSelector) => renderSelector(compileSelector(selector)),
  compileMatcher: (selector: LabelSelector) => {
    const requirements = compileSelector(selector);
    return (labels: Readonly<Record<string, string>>) => matches(requirements, labels);
  },
});

interface CompiledLimit {
  groups: ReadonlySet<string>;
  resources: ReadonlySet<string>;
  matches: (labels: Readonly<Record<string, string>>) => boolean;
  rendered: string;
}

/**
 * What one shard may see and touch in one cluster, compiled once per route table: the owned buckets, the label
 * selector the proxy injects per resource (rendered once and memoised), and the checks for single objects and
 * watch events.
 */
export class ClusterShardView {
  readonly name: string;
  readonly owned: ReadonlySet<number>;
  private readonly hashLabel: string;
  private readonly bucketSelector: string;
  private readonly limits: CompiledLimit[];
  private readonly owners: ReadonlyMap<number, string>;
  private readonly selectors = new Map<string, string>();
  private readonly namespaceBuckets = new Map<string, number>();
  private readonly bucketOfNamespace: (namespace: string) => number;

  constructor(options: { table: RouteTable; route: ClusterRoute; functions: ShardFunctions; fenced: boolean }) {
    const { table, route, functions, fenced } = options;
    this.name = route.name;
    this.hashLabel = table.labels.hash;
    this.owned = new Set(fenced ? [] : route.buckets);
    // `key,!key` matches nothing yet is valid, so a shard owning nothing gets a real (empty) list or watch.
    this.bucketSelector =
      this.owned.size === 0 ? `${this.hashLabel},!${this.hashLabel}` : `${this.hashLabel} in (${[...this.owned].sort((a, b) => a - b).join(',')})`;
    this.limits = route.limits.map((limit) => ({
      groups: new Set(limit.relateResources.flatMap((r) => r.apiGroups)),
      resources: new Set(limit.relateResources.flatMap((r) => r.resources)),
      matches: functions.compileMatcher(limit.selector),
      rendered: functions.renderSelector(limit.selector),
    }));
    this.owners = new Map(Object.entries(route.bucketOwners ?? {}).map(([bucket, shard]) => [Number(bucket), shard]));
    this.bucketOfNamespace = (namespace) => functions.bucketOf(namespace, table.hashAlgorithm, table.bucketCount);
  }

  get ownsNothing(): boolean {
    return this.owned.size === 0;
  }

  /** The selector injected into lists and watches of `group/resource`: owned buckets AND the limits naming it. */
  selectorFor(group: string, resource: string): string {
    const key = `${group}/${resource}`;
    let selector = this.selectors.get(key);
    if (selector === undefined) {
      const parts = [this.bucketSelector];
      for (const limit of this.limitsFor(group, resource)) if (limit.rendered !== '') parts.push(limit.rendered);
      selector = parts.join(',');
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
      bucket = this.bucketOfNamespace(namespace);
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
    const hash = labels[this.hashLabel];
    if (hash === undefined || !this.owned.has(Number(hash))) return false;
    return this.limitsFor(group, resource).every((limit) => limit.matches(labels));
  }

  private limitsFor(group: string, resource: string): CompiledLimit[] {
    return this.limits.filter(
      (l) => (l.groups.has('*') || l.groups.has(group)) && (l.resources.has('*') || l.resources.has(resource)),
    );
  }
}

/** Appends the shard's selector to the client's: requirements separated by commas are ANDed, never weakened. */
export function mergeSelectors(client: string | null, shard: string): string {
  return client === null || client.trim() === '' ? shard : `${client},${shard}`;
}
