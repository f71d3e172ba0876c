import type { Counter, Gauge, Histogram } from 'prom-client';
import type { ProxyMetrics } from '../../metrics/index.js';

type CounterChild = ReturnType<Counter<string>['labels']>;
type HistogramChild = ReturnType<Histogram<string>['labels']>;
type GaugeChild = ReturnType<Gauge<string>['labels']>;

/**
 * One cluster's metric children, bound when the cluster's link is built so the request path does a map lookup
 * instead of prom-client's label hashing.
 */
export class ClusterMetrics {
  readonly openWatches: GaugeChild;
  readonly watchEventsFiltered: CounterChild;
  readonly listsFiltered: { readonly noEcho: CounterChild; readonly unlabelled: CounterChild };
  private readonly durations = new Map<string, HistogramChild>();
  private readonly requests = new Map<string, CounterChild>();
  private readonly metrics: ProxyMetrics;
  private readonly cluster: string;

  constructor(metrics: ProxyMetrics, cluster: string) {
    this.metrics = metrics;
    this.cluster = cluster;
    this.openWatches = metrics.openWatches.labels({ cluster });
    this.watchEventsFiltered = metrics.watchEventsFiltered.labels({ cluster });
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
    let duration = this.durations.get(verb);
    if (duration === undefined) {
      duration = this.metrics.requestDuration.labels({ cluster: this.cluster, verb });
      this.durations.set(verb, duration);
    }
    duration.observe(seconds);
    const key = `${verb} ${resource} ${code}`;
    let counter = this.requests.get(key);
    if (counter === undefined) {
      counter = this.metrics.requests.labels({ cluster: this.cluster, verb, resource, code: String(code) });
      this.requests.set(key, counter);
    }
    counter.inc();
  }
}
