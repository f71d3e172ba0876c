import CircuitBreaker from 'opossum';
import type { Gauge } from 'prom-client';
import type { Logger } from 'pino';
import { ClientRequestError } from '../../errors.js';
import { BREAKER_STATE_VALUE } from '../../metrics/index.js';

export interface BreakerOptions {
  /** Failure percentage within the rolling window that opens the breaker. */
  errorThresholdPercentage: number;
  /** Requests within the window before the percentage counts. */
  volumeThreshold: number;
  /** Time open before one half-open probe is let through. */
  resetTimeoutMs: number;
  rollingCountTimeoutMs: number;
}

/** One forwarded call: resolves when the API server answered, rejects when it could not be reached. */
export type Forward = () => Promise<void>;

/**
 * The per-cluster breaker: an opossum breaker around "reach this cluster's API server". Transport errors and
 * response-head timeouts count as failures; any HTTP answer counts as success (the server is there), and so does a
 * request its client broke off.
 */
export function createClusterBreaker(options: {
  cluster: string;
  settings: BreakerOptions;
  gauge: Gauge<'cluster'>;
  logger: Logger;
}): CircuitBreaker<[Forward], void> {
  const { cluster, settings, gauge, logger } = options;
  const breaker = new CircuitBreaker<[Forward], void>((forward: Forward) => forward(), {
    // The connections' own head timeout (undici's, the HTTP/2 watches') bounds each call; opossum's timer would race it.
    timeout: false,
    errorThresholdPercentage: settings.errorThresholdPercentage,
    volumeThreshold: settings.volumeThreshold,
    resetTimeout: settings.resetTimeoutMs,
    rollingCountTimeout: settings.rollingCountTimeoutMs,
    // Opening reads the window's counts only. Latency percentiles would sort every latency in the window (15,000 at
    // 1,500 requests/s: 3 ms) at each failure and, with snapshots on, every second, for figures nothing reads.
    rollingPercentilesEnabled: false,
    enableSnapshots: false,
    // A request its client broke off says nothing of the API server: malformed bodies would open the breaker of a
    // healthy one (test/integration/proxy-client-gone.test.ts).
    errorFilter: (err: unknown) => err instanceof ClientRequestError,
    name: cluster,
  });
  const child = gauge.labels({ cluster });
  child.set(BREAKER_STATE_VALUE.closed);
  breaker.on('open', () => {
    child.set(BREAKER_STATE_VALUE.open);
    logger.warn({ cluster }, 'circuit breaker opened: requests to this cluster fail fast with 503');
  });
  breaker.on('halfOpen', () => {
    child.set(BREAKER_STATE_VALUE.halfOpen);
    logger.info({ cluster }, 'circuit breaker half-open: probing the API server');
  });
  breaker.on('close', () => {
    child.set(BREAKER_STATE_VALUE.closed);
    logger.info({ cluster }, 'circuit breaker closed: the API server answers again');
  });
  return breaker;
}
