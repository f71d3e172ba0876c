import type { Counter, Gauge, Histogram } from 'prom-client';
import type { ProxyMetrics } from '../../metrics/index.js';

type CounterChild = ReturnType<Counter<string>['labels']>;
type HistogramChild = ReturnType<Histogram<string>['labels']>;
type GaugeChild = ReturnType<Gauge<string>['labels']>;

/** The children of one verb: its duration, and its request counters by resource, then by code. */
interface VerbChildren {
  readonly duration: HistogramChild;
  readonly resources: Map<string, Map<number, CounterChild>>;
}

/**
 * One cluster's metric children, bound when the cluster's link is built (kept across tables while the link is), so
 * the request path never builds a label set or a key: `observe` is three map reads (verb, resource, code: the
 * strings the parser produced, the number the API server answered) and the children's own increments. A child is
 * made the first time its labels occur, once per link.
 */
export class ClusterMetrics {
  readonly openWatches: GaugeChild;
  readonly watchEventsFiltered: CounterChild;
  readonly listsFiltered: { readonly noEcho: CounterChild; readonly unlabelled: CounterChild };
  /** Counts one watch event filtered out; bound once, handed to every watch filter of the cluster. */
  readonly countFilteredEvent: () => void;
  private readonly verbs = new Map<string, VerbChildren>();
  private readonly metrics: ProxyMetrics;
  private readonly cluster: string;

  constructor(metrics: ProxyMetrics, cluster: string) {
    this.metrics = metrics;
    this.cluster = cluster;
    this.openWatches = metrics.openWatches.labels({ cluster });
    const filtered = metrics.watchEventsFiltered.labels({ cluster });
    this.watchEventsFiltered = filtered;
    this.countFilteredEvent = () => filtered.inc();
    this.listsFiltered = {
      noEcho: metrics.listsFiltered.labels({ cluster, reason: 'no-echo' }),
      unlabelled: metrics.listsFiltered.labels({ cluster, reason: 'unlabelled' }),
    };
    // Exported from the start (at 0), so a rate over them exists before the first list is filtered.
    this.listsFiltered.noEcho.inc(0);
    this.listsFiltered.unlabelled.inc(0);
  }

  /** Counts one answered request and its time to the response head. */
  observe(verb: string, resource: string, code: number, seconds: number): void {
    let children = this.verbs.get(verb);
    if (children === undefined) {
      children = { duration: this.metrics.requestDuration.labels({ cluster: this.cluster, verb }), resources: new Map() };
      this.verbs.set(verb, children);
    }
    children.duration.observe(seconds);
    let codes = children.resources.get(resource);
    if (codes === undefined) {
      codes = new Map();
      children.resources.set(resource, codes);
    }
    let counter = codes.get(code);
    if (counter === undefined) {
      counter = this.metrics.requests.labels({ cluster: this.cluster, verb, resource, code: String(code) });
      codes.set(code, counter);
    }
    counter.inc();
  }
}
