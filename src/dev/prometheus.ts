import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { TestbedError } from '../errors.js';
import { freePort } from './free-port.js';
import { httpOk } from './probes.js';
import { ServerProcess } from './server-process.js';

/** One process to scrape: its /metrics URL and the target labels Prometheus attaches (e.g. `cluster` for an agent). */
export interface ScrapeTarget {
  job: string;
  metricsUrl: string;
  labels?: Record<string, string>;
}

export interface PrometheusOptions {
  /** Holds the configuration, the TSDB and the log. */
  dir: string;
  targets: readonly ScrapeTarget[];
  scrapeIntervalSeconds: number;
  /** Default: the Debian package's /usr/bin/prometheus (scripts/setup.sh installs it). */
  binary?: string;
  logger?: Logger;
}

export interface PrometheusHandle {
  url: string;
  /** Runs an instant query; resolves the result vector (or matrix) as Prometheus returns it. */
  query(expr: string): Promise<{ metric: Record<string, string> }[]>;
  stop(): Promise<void>;
}

/** Prometheus' configuration (JSON is YAML): one scrape job per distinct `job`, one static group per target. */
function prometheusConfig(targets: readonly ScrapeTarget[], scrapeIntervalSeconds: number): string {
  const jobs = [...new Set(targets.map((t) => t.job))];
  return JSON.stringify(
    {
      global: { scrape_interval: `${scrapeIntervalSeconds}s`, evaluation_interval: `${scrapeIntervalSeconds}s` },
      scrape_configs: jobs.map((job) => ({
        job_name: job,
        static_configs: targets
          .filter((t) => t.job === job)
          .map((t) => {
            const url = new URL(t.metricsUrl);
            return { targets: [url.host], labels: { ...t.labels, __metrics_path__: url.pathname } };
          }),
      })),
    },
    null,
    2,
  );
}

/** A Prometheus server on 127.0.0.1 with its TSDB under `dir`, scraping the given targets. */
export async function startPrometheus(options: PrometheusOptions): Promise<PrometheusHandle> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  await mkdir(join(options.dir, 'data'), { recursive: true });
  const configFile = join(options.dir, 'prometheus.yml');
  await writeFile(configFile, prometheusConfig(options.targets, options.scrapeIntervalSeconds));
  const server = new ServerProcess({
    name: 'prometheus',
    binary: options.binary ?? '/usr/bin/prometheus',
    dir: options.dir,
    logFileName: 'prometheus.log',
    args: [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${join(options.dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--storage.tsdb.retention.time=1h',
    ],
    probe: () => httpOk(`${url}/-/ready`),
    readyTimeoutMs: 30_000,
    stopTimeoutMs: 10_000,
    ...(options.logger ? { logger: options.logger } : {}),
  });
  await server.start();
  return {
    url,
    async query(expr) {
      const res = await fetch(`${url}/api/v1/query?${new URLSearchParams({ query: expr })}`);
      const body = (await res.json()) as { status: string; error?: string; data?: { result: { metric: Record<string, string> }[] } };
      if (body.status !== 'success') throw new TestbedError(`Prometheus rejected the query ${expr}: ${body.error ?? res.status}`);
      return body.data?.result ?? [];
    },
    stop: () => server.stop(),
  };
}
